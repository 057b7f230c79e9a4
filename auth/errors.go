package auth

import (
	"encoding/json"
	"net/http"
)

// WriteError writes {"error": msg} with status: the one shape of every error
// the door and the native API answer, so scripts and people with curl read
// the same message whoever refused them.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, map[string]string{"error": msg})
}

// WriteJSON writes v as JSON with status. HTML is not escaped: the answers
// are read by programs and people, never embedded in a page.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
