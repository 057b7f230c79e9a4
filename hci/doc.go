// Package hci is deskenv's action vocabulary and the executor that performs it
// on one X display.
//
// # Actions
//
// An Action is exactly the input of Anthropic's computer_20251124 tool, so a
// model's tool_use runs unchanged and a human demonstration reduces to the
// same thing. The 17 actions (Actions) and their fields:
//
//	screenshot                                    nothing to do here; the caller captures
//	left_click, right_click, middle_click,        coordinate? (moves first), text or key? (modifiers held
//	double_click, triple_click                    during the click, "shift", "ctrl+shift")
//	mouse_move                                    coordinate
//	left_click_drag                               start_coordinate, coordinate, text or key? (modifiers)
//	left_mouse_down, left_mouse_up                coordinate? (moves first)
//	scroll                                        scroll_direction (up/down/left/right = X buttons 4/5/6/7),
//	                                              scroll_amount? (notches 1..100, default 3), coordinate?, text or key?
//	type                                          text (at most 64 KiB; newline types Return, tab Tab)
//	key                                           text: chords separated by spaces, "ctrl+a Delete"
//	hold_key                                      text, duration (seconds 0..100)
//	wait                                          duration (seconds 0..100)
//	cursor_position                               nothing; Result.Text is "X=12,Y=34" in model space
//	zoom                                          region [x0,y0,x1,y1]; Result.Zoom is the screen rectangle
//
// ParseAction decodes JSON strictly (unknown fields and wrong types are errors
// naming the field); Validate checks an action against a Space: required and
// forbidden fields, coordinates inside model space (an error, never a clamp),
// key names, text, ranges. Mutates tells whether the screen may change.
//
// # Spaces
//
// Coordinates in actions are in model space, the pixels of the screenshot the
// model saw. Space converts to and from screen space exactly, in one place:
// each model pixel goes to the screen pixel under its centre and back to
// itself. NewSpace("auto") picks what Anthropic's reference picks: the first of
// 1024x768, 1280x800 and 1366x768 whose aspect ratio is within 0.02 of the
// screen's and that fits in it, else no scaling.
//
// # Key names
//
// A chord is key names joined by "+", pressed in order and released in
// reverse. A name is, in this order of precedence:
//
//   - a single character: "a", "A" (pressed with Shift, as xdotool does, so
//     "ctrl+A" is ctrl+shift+a), "1", "é", "€", "日";
//   - an X keysym name, exactly as X spells it: Return, Page_Down, KP_Enter,
//     BackSpace, F1..F35, Super_L, XF86AudioMute, eacute, EuroSign, ... Note
//     that X names win over aliases: "uparrow" is the ↑ character, not the Up key;
//   - an alias, case-insensitive (below);
//   - "U20AC" or "U+20AC" (a Unicode character), "0xff0d" (a raw keysym);
//   - an X keysym name in any case ("return", "PAGE_DOWN", "f5") when that is
//     unambiguous ("AACUTE" is not: Aacute or aacute).
//
// An unknown name fails the whole action before anything is sent, with a
// suggestion: unknown key name "Retrun" in "ctrl+Retrun"; did you mean Return?
// The plus key is "plus", or "+" when it is the whole chord or the last key
// ("ctrl++"). Spaces around "+" are ignored ("ctrl + s"). A key action's text
// " " is the space bar.
//
// Aliases (case-insensitive):
//
//	ctrl control lctrl leftctrl              Control_L    rctrl rightctrl          Control_R
//	shift lshift leftshift                   Shift_L      rshift rightshift        Shift_R
//	alt lalt leftalt option opt              Alt_L        ralt rightalt            Alt_R
//	super lsuper win windows lwin cmd        Super_L      rsuper rwin rcmd rmeta   Super_R
//	  command meta lmeta os
//	altgr altgraph                           ISO_Level3_Shift                      hyper  Hyper_L
//	enter return ret newline                 Return       esc escape               Escape
//	tab                                      Tab          space spacebar spc       space
//	backspace bksp bs back_space             BackSpace    del delete forwarddelete Delete
//	                                                        forward_delete
//	ins insert                               Insert       home / end               Home / End
//	pgup pageup page_up prior                Prior        pgdn pgdown pagedown     Next
//	                                                        page_down next
//	up arrowup up_arrow arrow_up             Up           down arrowdown           Down
//	                                                        down_arrow arrow_down
//	left arrowleft left_arrow arrow_left     Left         right arrowright         Right
//	                                                        right_arrow arrow_right
//	capslock caps                            Caps_Lock    numlock                  Num_Lock
//	scrolllock                               Scroll_Lock  sysrq                    Sys_Req
//	print printscreen prtsc prtscr prtscn    Print        pause / break            Pause / Break
//	  prntscrn
//	menu apps contextmenu application        Menu
//	dot                                      period       quote singlequote        apostrophe
//	doublequote                              quotedbl     backquote backtick       grave
//	tilde                                    asciitilde   pipe                     bar
//	lbracket rbracket                        bracketleft, bracketright
//	lbrace rbrace                            braceleft, braceright
//	lparen rparen                            parenleft, parenright
//	hash                                     numbersign   underline                underscore
//	dollar_sign at_sign question_mark        dollar, at, question
//	volumeup volume_up                       XF86AudioRaiseVolume
//	volumedown volume_down                   XF86AudioLowerVolume
//	mute volumemute volume_mute              XF86AudioMute
//	playpause mediaplaypause                 XF86AudioPlay  mediastop              XF86AudioStop
//	nexttrack medianexttrack mediatracknext  XF86AudioNext
//	prevtrack mediaprevioustrack             XF86AudioPrev
//	  mediatrackprevious
//	browserback browserforward               XF86Back, XF86Forward
//	browserrefresh                           XF86Reload
//
// "meta", "cmd" and "win" are Super, the key X desktops bind to the
// Windows/Command key (and what browsers report as "Meta"); xdotool maps
// "meta" to Meta_L, which on common layouts is Shift+Alt. Write Meta_L for
// that.
//
// # Typing any text
//
// Characters the keyboard layout has are typed with their key (and Shift for
// the shifted level). Others (é on a US layout, €, 日, 😀) are bound on the fly
// to spare keycodes (keycodes with no symbol), on both shift levels, with
// ChangeKeyboardMapping. Bindings are kept and reused, least recently used
// first; a keycode is rebound only after Options.SpareReuseAge since its last
// press, and keys are pressed only Options.BindSettle after a rebinding, in
// batches. Measured on xterm, mousepad (GTK) and Chromium: text arrives intact
// where xdotool type (which binds and unbinds one scratch keycode per
// character) garbles it even at its default delay.
//
// # Executor, sources and the bus
//
// An Executor injects through XTEST on its own X connection to the display
// (it must read MappingNotify events, which a shared connection's other users
// would otherwise steal or never drain), redialled when the display's server
// is restarted. Everything it sends is serialised and followed by one round
// trip, so when a call returns the server has processed the events.
//
// Agents call Do; people's input (the stream) arrives as primitives in screen
// coordinates: KeyDown/KeyUp by keysym, ButtonDown/ButtonUp, MoveTo, Wheel.
// Every call carries a Source (agent, human, script, replay, or a viewer's
// own id); held keys and buttons are tracked per source so ReleaseHeldBy can
// let go of what one viewer holds and ReleaseAll of everything. Gates
// (AddGate) may refuse calls by source. Every executed action and primitive is
// published on the Bus with its source, time and outcome; a slow subscriber
// loses events rather than stalling input.
//
// # Known limits
//
// Typed text assumes no modifier is held by anyone else: if a person holds
// Shift while an agent types "a", the application sees "A"; Caps Lock is not
// compensated either. A keysym the layout has only on the shifted level is
// typed with Shift (KP_5 on the keypad, Meta_L as Shift+Alt).
package hci
