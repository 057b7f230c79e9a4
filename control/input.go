package control

import (
	"errors"
	"fmt"

	"github.com/deskenv/deskenv/internal/wire"
)

// maxIDBytes bounds the ids a client names (episodes, tasks): they are
// names, not data, and end up in file names, logs and answers. OpenEnv's
// episode_id allows 255 characters; bytes are the stricter count.
const maxIDBytes = 255

// ErrBadInput is wrapped by errors about what a client sent that can never
// be right, such as an id of a megabyte: a 400, not a 500.
var ErrBadInput = errors.New("bad input")

// checkID refuses an id that is too long or not UTF-8, quoting only its
// start.
func checkID(kind, id string) error {
	if len(id) > maxIDBytes {
		return fmt.Errorf("%w: %s %s is %d bytes long: at most %d", ErrBadInput, kind, wire.Quote(id), len(id), maxIDBytes)
	}
	if err := wire.CheckString(id); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrBadInput, kind, wire.Quote(id), err)
	}
	return nil
}
