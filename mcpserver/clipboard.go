package mcpserver

import (
	"context"
	"fmt"

	"github.com/deskenv/deskenv/internal/wire"
)

// Clipboard reads and sets the text of the desktop's clipboard. The
// appliance gives it an xsel.Clipboard (internal/xsel), the one clipboard
// owner the stream uses too.
type Clipboard interface {
	ReadClipboard(ctx context.Context) (string, error)
	WriteClipboard(ctx context.Context, text string) error
}

// ClipboardTrait adds clipboard_get and clipboard_set on the desktop's
// CLIPBOARD selection.
type ClipboardTrait struct {
	Clipboard Clipboard
}

// Name is "clipboard".
func (ClipboardTrait) Name() string { return "clipboard" }

// Check refuses a trait without a clipboard to use.
func (c ClipboardTrait) Check() error {
	if c.Clipboard == nil {
		return fmt.Errorf("mcpserver: the clipboard trait has no Clipboard")
	}
	return nil
}

// Tools are clipboard_get and clipboard_set.
func (c ClipboardTrait) Tools() []TraitTool {
	return []TraitTool{
		{
			Name: "clipboard_get", Title: "Read the clipboard", ReadOnly: true, Idempotent: true,
			Description: "Read the text on the desktop's clipboard (what ctrl+v would paste). Empty when nothing holds it.",
			Returns:     "-> str",
			Run: func(ctx context.Context, _ TraitArgs) (TraitResult, error) {
				text, err := c.Clipboard.ReadClipboard(ctx)
				if err != nil {
					return TraitResult{}, fmt.Errorf("clipboard_get: %w", err)
				}
				// An app on the desktop may hold bytes that are not UTF-8;
				// JSON would hand the model U+FFFD in their place.
				if err := wire.CheckString(text); err != nil {
					return TraitResult{}, fmt.Errorf("clipboard_get: the clipboard holds %d bytes that are not UTF-8 text: %w", len(text), err)
				}
				return TraitResult{Value: text, Text: text}, nil
			},
		},
		{
			Name: "clipboard_set", Title: "Set the clipboard", Idempotent: true,
			Description: "Put text on the desktop's clipboard, so ctrl+v in an app pastes it (faster than typing long text).",
			Params: []TraitParam{
				{Name: "text", Type: ParamString, Required: true, Description: "The text to put on the clipboard."},
			},
			Run: func(ctx context.Context, a TraitArgs) (TraitResult, error) {
				text := a.Str("text")
				if err := c.Clipboard.WriteClipboard(ctx, text); err != nil {
					return TraitResult{}, fmt.Errorf("clipboard_set: %w", err)
				}
				return TraitResult{Value: nil, Text: fmt.Sprintf("the clipboard now holds %d bytes of text", len(text))}, nil
			},
		},
	}
}
