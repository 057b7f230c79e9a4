package control

import (
	"net/http"

	"github.com/deskenv/deskenv/auth"
)

// writeError writes {"error": msg}: auth.WriteError, the one JSON error.
func writeError(w http.ResponseWriter, status int, msg string) { auth.WriteError(w, status, msg) }
