// Browser KeyboardEvent -> X keysym. Pure functions, no DOM: the e2e suite
// runs them under node as well as in the page.
//
// Printable characters come from event.key, so the keysym is the character the
// person's own layout produced (an AZERTY "a" is an "a", not a "q"); keys that
// name an action (Enter, arrows, F1...) come from their key name, and keys whose
// side or keypad position matters (Shift_L vs Shift_R, KP_1) from event.code.

// Names from KeyboardEvent.key for non-printable keys.
const NAMED = {
  Enter: 0xff0d, Escape: 0xff1b, Tab: 0xff09, Backspace: 0xff08, Delete: 0xffff,
  Insert: 0xff63, Home: 0xff50, End: 0xff57, PageUp: 0xff55, PageDown: 0xff56,
  ArrowLeft: 0xff51, ArrowUp: 0xff52, ArrowRight: 0xff53, ArrowDown: 0xff54,
  CapsLock: 0xffe5, NumLock: 0xff7f, ScrollLock: 0xff14, Pause: 0xff13,
  PrintScreen: 0xff61, ContextMenu: 0xff67, Clear: 0xff0b, Cancel: 0xff69,
  Help: 0xff6a, Execute: 0xff62, Select: 0xff60, Find: 0xff68, Redo: 0xff66,
  Undo: 0xff65, Again: 0xff66, Props: 0x1005ff70, Copy: 0x1008ff57, Cut: 0x1008ff58,
  Paste: 0x1008ff6d, Open: 0x1008ff6b,
  // Modifiers when the code does not say which side (some virtual keyboards).
  Shift: 0xffe1, Control: 0xffe3, Alt: 0xffe9, Meta: 0xffeb, OS: 0xffeb, Super: 0xffeb,
  Hyper: 0xffed, AltGraph: 0xfe03, Compose: 0xff20,
  // Media keys (XF86 keysyms).
  AudioVolumeMute: 0x1008ff12, AudioVolumeDown: 0x1008ff11, AudioVolumeUp: 0x1008ff13,
  MediaPlayPause: 0x1008ff14, MediaStop: 0x1008ff15, MediaTrackPrevious: 0x1008ff16,
  MediaTrackNext: 0x1008ff17, BrowserBack: 0x1008ff26, BrowserForward: 0x1008ff27,
  BrowserRefresh: 0x1008ff29, BrowserHome: 0x1008ff18, BrowserSearch: 0x1008ff1b,
  // Japanese/Korean input keys.
  KanaMode: 0xff2d, HiraganaKatakana: 0xff27, Hiragana: 0xff25, Katakana: 0xff26,
  Zenkaku: 0xff28, Hankaku: 0xff29, ZenkakuHankaku: 0xff2a, Romaji: 0xff24,
  KanjiMode: 0xff21, Convert: 0xff23, NonConvert: 0xff22, Eisu: 0xff2f,
  HangulMode: 0xff31, HanjaMode: 0xff34,
};

// Keys whose physical position picks the keysym, from KeyboardEvent.code.
const BY_CODE = {
  ShiftLeft: 0xffe1, ShiftRight: 0xffe2, ControlLeft: 0xffe3, ControlRight: 0xffe4,
  AltLeft: 0xffe9, MetaLeft: 0xffeb, MetaRight: 0xffec, OSLeft: 0xffeb, OSRight: 0xffec,
  NumpadEnter: 0xff8d, NumpadAdd: 0xffab, NumpadSubtract: 0xffad,
  NumpadMultiply: 0xffaa, NumpadDivide: 0xffaf, NumpadEqual: 0xffbd,
  NumpadComma: 0xffac,
};

// Keypad keys with NumLock off report navigation names in event.key.
const KEYPAD_NAV = {
  Home: 0xff95, ArrowLeft: 0xff96, ArrowUp: 0xff97, ArrowRight: 0xff98, ArrowDown: 0xff99,
  PageUp: 0xff9a, PageDown: 0xff9b, End: 0xff9c, Clear: 0xff9d, Insert: 0xff9e, Delete: 0xff9f,
};

/** keysymForChar maps one Unicode character to its X keysym. */
export function keysymForChar(ch) {
  const cp = ch.codePointAt(0);
  if (cp === undefined) return 0;
  // Latin-1 keysyms equal their code point; everything else has a Unicode keysym.
  if ((cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff)) return cp;
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return 0; // control characters are not typed
  return 0x01000000 + cp;
}

function isOneChar(s) {
  if (!s) return false;
  const it = s[Symbol.iterator]();
  return !it.next().done && it.next().done;
}

/**
 * keysymFor returns the X keysym for a keydown/keyup event shape
 * ({key, code, location?}), or 0 when the key should not be sent (dead keys
 * mid-composition, IME processing, unknown keys).
 */
export function keysymFor(ev) {
  const key = ev.key ?? '';
  const code = ev.code ?? '';

  if (code === 'AltRight') return key === 'AltGraph' ? 0xfe03 : 0xffea;
  if (code in BY_CODE) return BY_CODE[code];

  if (code.startsWith('Numpad')) {
    if (/^[0-9]$/.test(key)) return 0xffb0 + Number(key); // KP_0..KP_9
    if (code === 'NumpadDecimal') {
      if (key === 'Delete') return 0xff9f;
      return 0xffae; // KP_Decimal, whatever the locale prints
    }
    if (key in KEYPAD_NAV) return KEYPAD_NAV[key];
  }

  const f = /^F([1-9]|1[0-9]|2[0-4])$/.exec(key);
  if (f) return 0xffbe + Number(f[1]) - 1; // F1..F24 are consecutive

  if (key in NAMED) return NAMED[key];
  if (key === 'Dead' || key === 'Process' || key === 'Unidentified' || key === '') {
    return fallbackByCode(code, key);
  }
  if (isOneChar(key)) return keysymForChar(key);
  return fallbackByCode(code, key);
}

// fallbackByCode gives a US-layout guess for keys the browser could not name
// (key "Unidentified"); dead keys and IME processing send nothing, since the
// composed character arrives on a later event.
function fallbackByCode(code, key) {
  if (key === 'Dead' || key === 'Process') return 0;
  let m = /^Key([A-Z])$/.exec(code);
  if (m) return m[1].toLowerCase().charCodeAt(0);
  m = /^Digit([0-9])$/.exec(code);
  if (m) return m[1].charCodeAt(0);
  const us = {
    Space: 0x20, Minus: 0x2d, Equal: 0x3d, BracketLeft: 0x5b, BracketRight: 0x5d,
    Backslash: 0x5c, Semicolon: 0x3b, Quote: 0x27, Backquote: 0x60, Comma: 0x2c,
    Period: 0x2e, Slash: 0x2f, IntlBackslash: 0x3c,
  };
  return us[code] ?? 0;
}

/**
 * KeyTracker remembers which keysym went down for each physical key, so the
 * key up sends the same keysym even if modifiers changed in between (press
 * "a", press Shift, release "a": the up must be "a", not "A").
 */
export class KeyTracker {
  constructor() { this.down = new Map(); }

  /** press returns the keysym to send for a keydown, or 0. */
  press(ev) {
    const id = ev.code || ev.key;
    const held = this.down.get(id);
    if (held !== undefined && ev.repeat) return held; // auto-repeat keeps the first keysym
    const sym = keysymFor(ev);
    if (sym) this.down.set(id, sym);
    return sym;
  }

  /** release returns the keysym to send for a keyup, or 0 if none went down. */
  release(ev) {
    const id = ev.code || ev.key;
    const sym = this.down.get(id);
    if (sym === undefined) return 0;
    this.down.delete(id);
    return sym;
  }

  /** releaseAll forgets every held key and returns their keysyms. */
  releaseAll() {
    const syms = [...this.down.values()];
    this.down.clear();
    return syms;
  }

  get size() { return this.down.size; }
}
