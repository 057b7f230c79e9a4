package record

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/internal/wire"
)

// Who may touch which episode. Operators (and everyone in local mode) may
// touch every episode; an annotator only those it started itself, named by
// Meta.RecordedBy, which the recorder writes from the door's caller and no
// client can set. The door decides who reaches the recording API at all;
// this file decides, per episode, what an annotator reaching it may do.

// mayTouch reports whether the caller of ctx may act on an episode recorded
// by by.
func mayTouch(ctx context.Context, by string) bool {
	if auth.RoleFrom(ctx) != auth.RoleAnnotator {
		return true
	}
	who := auth.WhoFrom(ctx)
	return who != "" && who == by
}

// notYours is the refusal of an annotator reaching for someone else's
// episode. It names the episode (the caller named it) and nobody else.
func notYours(id string) string {
	return fmt.Sprintf("episode %s was not recorded with this token: an annotator token may touch only the episodes it recorded itself", wire.Quote(id))
}

// recordedBy is who started the episode being recorded.
func (ep *Episode) recordedBy() string {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.meta.RecordedBy
}

// statusFor is the Status as the caller of ctx may see it: an annotator
// sees the last episode only if it recorded it (its outcome is the reward
// the page shows on Finish), never someone else's, and no paths on the
// appliance's disk.
func (r *Recorder) statusFor(ctx context.Context) Status {
	st := r.Status()
	if st.Last != nil && !mayTouch(ctx, st.Last.RecordedBy) {
		st.Last = nil
	}
	if auth.RoleFrom(ctx) == auth.RoleAnnotator {
		st.Dir = ""
		if st.Episode != nil {
			ep := *st.Episode
			ep.Dir = ""
			st.Episode = &ep
		}
	}
	return st
}

// Discard stops the recording of episode id if it is being recorded (no
// outcome), and deletes its directory: nothing of it is left on disk. An
// annotator's Discard button; exports never see the episode again.
func (r *Recorder) Discard(ctx context.Context, id string) error {
	r.mu.Lock()
	ep := r.cur
	r.mu.Unlock()
	if ep != nil && ep.id == id {
		if _, err := r.StopEpisode(ctx, id, nil); err != nil && !errors.Is(err, ErrNotRecording) {
			return fmt.Errorf("discard episode %s: stop its recording: %w", wire.Quote(id), err)
		}
	}
	dir, err := r.find(id)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("discard episode %s: %w", wire.Quote(id), err)
	}
	r.mu.Lock()
	if r.last != nil && r.last.ID == id {
		r.last = nil
	}
	r.mu.Unlock()
	r.log.Info("episode discarded", "episode", id, "dir", dir)
	return nil
}

// ResetGuard refuses an annotator's reset while someone else's recording
// runs: the reset would end the episode under it. Operators (and local
// mode) reset whenever they like, and an annotator may cut short its own.
// The appliance hands it to the control plane (control.Config.ResetGuard).
func (r *Recorder) ResetGuard(ctx context.Context) error {
	r.mu.Lock()
	ep := r.cur
	r.mu.Unlock()
	if ep == nil || mayTouch(ctx, ep.recordedBy()) {
		return nil
	}
	return fmt.Errorf("episode %s is being recorded by someone else: an annotator may not reset the desktop under it; wait until it stops", wire.Quote(ep.id))
}

// ownerOf is who recorded episode id, and whether it exists.
func (r *Recorder) ownerOf(id string) (string, error) {
	dir, err := r.find(id)
	if err != nil {
		return "", err
	}
	head, err := openMeta(dir)
	if err != nil {
		return "", err
	}
	return head.Meta.RecordedBy, nil
}

// mine answers 404 or 403 and returns false unless the caller may touch
// episode id.
func (r *Recorder) mine(w http.ResponseWriter, req *http.Request, id string) bool {
	by, err := r.ownerOf(id)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return false
	}
	if !mayTouch(req.Context(), by) {
		writeError(w, http.StatusForbidden, notYours(id))
		return false
	}
	return true
}

func (r *Recorder) apiDiscard(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	if !r.mine(w, req, id) {
		return
	}
	if err := r.Discard(req.Context(), id); err != nil {
		if errors.Is(err, errNoEpisode) {
			writeError(w, http.StatusNotFound, err.Error())
			return
		}
		r.answer(w, http.StatusOK, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"discarded": id})
}

// mayControl answers 403 and returns false when an annotator reaches for a
// recording it did not start (pause, resume, stop).
func (r *Recorder) mayControl(w http.ResponseWriter, req *http.Request) bool {
	r.mu.Lock()
	ep := r.cur
	r.mu.Unlock()
	if ep == nil || mayTouch(req.Context(), ep.recordedBy()) {
		return true // not recording: the handler says so
	}
	writeError(w, http.StatusForbidden, notYours(ep.id))
	return false
}
