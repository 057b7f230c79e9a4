package record

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/deskenv/deskenv/internal/wire"
)

// One recorded episode as a reviewer reads it:
//
//	GET /api/recording/episodes/{id}               episode.json, the review and the steps
//	GET /api/recording/episodes/{id}/shots/{file}  one observation (shots/NNNNNN.png)
//
// The observation route hands out files from the appliance's disk, so it is
// written for the attacker: the name must look like a name the recorder
// writes (digits and .png), nothing else in the episode directory is
// reachable through it, and neither the episode's directory, its shots
// directory nor the file may be a symlink. An annotator reaches only its own
// episodes, as everywhere else (access.go).

// EpisodeDetail is one episode for the review view.
type EpisodeDetail struct {
	Episode Meta   `json:"episode"`
	Review  Review `json:"review"`
	// Steps are steps.jsonl as written: each action in the computer tool's
	// schema (typed text in its text), its before and after observations as
	// paths relative to the episode (shots/000003.png), which are also
	// relative to this route's URL: GET .../{id}/shots/000003.png.
	Steps []Step `json:"steps"`
	// Torn counts an unfinished last line of steps.jsonl that was left out
	// (a recorder that died mid-write).
	Torn int `json:"torn,omitempty"`
}

// Detail reads the episode with id for the review view. Only episode.json,
// review.json and steps.jsonl are read: input.jsonl, much larger, is not
// needed to show the steps.
func (r *Recorder) Detail(id string) (*EpisodeDetail, error) {
	dir, err := r.find(id)
	if err != nil {
		return nil, err
	}
	head, err := openMeta(dir)
	if err != nil {
		return nil, err
	}
	steps, torn, err := readLines[Step](filepath.Join(dir, StepsFile))
	if err != nil {
		return nil, fmt.Errorf("read episode %s's steps: %w", wire.Quote(id), err)
	}
	rev, err := ReadReview(dir)
	if err != nil {
		rev = Review{Status: ReviewUnreviewed, Note: "the review file cannot be read: " + err.Error()}
	}
	if steps == nil {
		steps = []Step{}
	}
	return &EpisodeDetail{Episode: head.Meta, Review: rev, Steps: steps, Torn: torn}, nil
}

func (r *Recorder) apiEpisode(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	if !r.mine(w, req, id) {
		return
	}
	d, err := r.Detail(id)
	if err != nil {
		if errors.Is(err, errNoEpisode) {
			writeError(w, http.StatusNotFound, err.Error())
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// shotName is the only shape of name the observation route serves: what the
// recorder writes (%06d.png; more digits after a million observations).
var shotName = regexp.MustCompile(`^[0-9]{6,12}\.png$`)

// maxShotBytes bounds an observation served: a 4K PNG is a few megabytes;
// a file much larger in shots/ is not one the recorder wrote.
const maxShotBytes = 64 << 20

// errNotShot is a name or file the observation route will not serve.
var errNotShot = errors.New("not an observation of this episode")

// openShot opens the observation file of the episode in dir, refusing
// anything but a regular file named like one, directly in a real (not
// symlinked) shots directory of a real episode directory.
func openShot(dir, file string) (*os.File, os.FileInfo, error) {
	if !shotName.MatchString(file) {
		return nil, nil, fmt.Errorf("%w: %s is not an observation's name (shots are named like 000003.png)", errNotShot, wire.Quote(file))
	}
	for _, p := range []string{dir, filepath.Join(dir, ShotsDir)} {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", errNotShot, file, err)
		}
		if !fi.IsDir() {
			// A symlink here could point anywhere on the appliance's disk.
			return nil, nil, fmt.Errorf("%w: %s is not in a real directory", errNotShot, wire.Quote(file))
		}
	}
	// O_NOFOLLOW: a symlink planted in shots/ fails to open rather than
	// being followed; O_NONBLOCK: a FIFO planted there cannot hang us.
	f, err := os.OpenFile(filepath.Join(dir, ShotsDir, file), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", errNotShot, wire.Quote(file), err)
	}
	fi, err := f.Stat()
	if err == nil && (!fi.Mode().IsRegular() || fi.Size() > maxShotBytes) {
		err = fmt.Errorf("%w: %s is not a regular file the recorder wrote", errNotShot, wire.Quote(file))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func (r *Recorder) apiShot(w http.ResponseWriter, req *http.Request) {
	id, file := req.PathValue("id"), req.PathValue("file")
	if !r.mine(w, req, id) {
		return
	}
	dir, err := r.find(id)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	f, fi, err := openShot(dir, file)
	if err != nil {
		// The reason goes to the log; the caller learns only that there is
		// no such observation, not what is on the disk.
		r.log.Info("observation refused", "episode", id, "file", wire.Prefix(file, 80), "err", err)
		writeError(w, http.StatusNotFound, fmt.Sprintf("episode %s has no observation %s", wire.Quote(id), wire.Quote(wire.Prefix(file, 80))))
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("X-Content-Type-Options", "nosniff")
	// An observation never changes once written (atomically), but it is
	// behind a token: the browser may keep it, shared caches may not.
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("Content-Length", fmt.Sprint(fi.Size()))
	w.WriteHeader(http.StatusOK)
	if req.Method != http.MethodHead {
		io.Copy(w, io.LimitReader(f, fi.Size()))
	}
}
