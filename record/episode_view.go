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
//	GET /api/recording/episodes/{id}/video/{file}  one video segment (video/NNNNNN.h264)
//
// The observation and video routes hand out files from the appliance's disk, so it is
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
	// Frames is frames.jsonl: where each video frame is in its segment
	// (video/NNNNNN.h264, relative to this route's URL too) and when it
	// was captured, so a page can decode from a keyframe to a step's time.
	Frames []Frame `json:"frames,omitempty"`
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
	frames, ftorn, err := readLines[Frame](filepath.Join(dir, FramesFile))
	if err != nil {
		return nil, fmt.Errorf("read episode %s's video index: %w", wire.Quote(id), err)
	}
	rev, err := ReadReview(dir)
	if err != nil {
		rev = Review{Status: ReviewUnreviewed, Note: "the review file cannot be read: " + err.Error()}
	}
	if steps == nil {
		steps = []Step{}
	}
	return &EpisodeDetail{Episode: head.Meta, Review: rev, Steps: steps, Frames: frames, Torn: torn + ftorn}, nil
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

// episodeFile is a kind of file the review routes serve: the only shape of
// name the recorder writes for it (%06d; more digits past a million), the
// directory it is in, its type and the largest such file the recorder makes.
type episodeFile struct {
	sub   string
	name  *regexp.Regexp
	ctype string
	max   int64
	what  string
}

var (
	// An observation: a 4K PNG is a few megabytes.
	shotFile = episodeFile{ShotsDir, regexp.MustCompile(`^[0-9]{6,12}\.png$`), "image/png", 64 << 20, "observation"}
	// A video segment: 30 s at a few Mbit/s is tens of megabytes.
	videoFile = episodeFile{VideoDir, regexp.MustCompile(`^[0-9]{6,12}\.h264$`), "application/octet-stream", 512 << 20, "video segment"}
)

// errNotServed is a name or file the review routes will not serve.
var errNotServed = errors.New("not a file of this episode the review routes serve")

// open opens the file of the episode in dir, refusing anything but a
// regular file named like one, directly in a real (not symlinked)
// directory of a real episode directory.
func (k episodeFile) open(dir, file string) (*os.File, os.FileInfo, error) {
	if !k.name.MatchString(file) {
		return nil, nil, fmt.Errorf("%w: %s is not a %s's name", errNotServed, wire.Quote(file), k.what)
	}
	for _, p := range []string{dir, filepath.Join(dir, k.sub)} {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", errNotServed, file, err)
		}
		if !fi.IsDir() {
			// A symlink here could point anywhere on the appliance's disk.
			return nil, nil, fmt.Errorf("%w: %s is not in a real directory", errNotServed, wire.Quote(file))
		}
	}
	// O_NOFOLLOW: a symlink planted there fails to open rather than being
	// followed; O_NONBLOCK: a FIFO planted there cannot hang us.
	f, err := os.OpenFile(filepath.Join(dir, k.sub, file), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", errNotServed, wire.Quote(file), err)
	}
	fi, err := f.Stat()
	if err == nil && (!fi.Mode().IsRegular() || fi.Size() > k.max) {
		err = fmt.Errorf("%w: %s is not a regular file the recorder wrote", errNotServed, wire.Quote(file))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func (r *Recorder) apiShot(w http.ResponseWriter, req *http.Request) {
	r.serveFile(w, req, shotFile)
}

func (r *Recorder) apiVideo(w http.ResponseWriter, req *http.Request) {
	r.serveFile(w, req, videoFile)
}

func (r *Recorder) serveFile(w http.ResponseWriter, req *http.Request, k episodeFile) {
	id, file := req.PathValue("id"), req.PathValue("file")
	if !r.mine(w, req, id) {
		return
	}
	dir, err := r.find(id)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	f, fi, err := k.open(dir, file)
	if err != nil {
		// The reason goes to the log; the caller learns only that there is
		// no such file, not what is on the disk.
		r.log.Info("episode file refused", "episode", id, "file", wire.Prefix(file, 80), "err", err)
		writeError(w, http.StatusNotFound, fmt.Sprintf("episode %s has no %s %s", wire.Quote(id), k.what, wire.Quote(wire.Prefix(file, 80))))
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", k.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	// A finished file never changes (observations are written atomically;
	// the open segment of a live episode still grows), and it is behind a
	// token: the browser may keep it a little, shared caches never.
	h.Set("Cache-Control", "private, max-age=60")
	h.Set("Content-Length", fmt.Sprint(fi.Size()))
	w.WriteHeader(http.StatusOK)
	if req.Method != http.MethodHead {
		io.Copy(w, io.LimitReader(f, fi.Size()))
	}
}
