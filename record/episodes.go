package record

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/internal/wire"
)

// The recorded episodes, as the control plane's operators see them:
//
//	GET /api/recording/episodes                 every episode under the directory, newest first
//	GET /api/recording/episodes/{id}/review     its review (unreviewed when none)
//	PUT /api/recording/episodes/{id}/review     {"status": "accepted"|"rejected"|"unreviewed", "note": "..."}
//
// An episode is named by the id in its episode.json, never by a path: an id
// is only compared with the ids on disk, so it cannot reach outside the
// episodes directory.

// EpisodeSummary is one recorded episode in the list.
type EpisodeSummary struct {
	ID     string `json:"episode_id"`
	Dir    string `json:"dir"` // the directory's name under the episodes directory
	TaskID string `json:"task_id,omitempty"`
	Source string `json:"source"`
	// RecordedBy is who started the recording (Meta.RecordedBy).
	RecordedBy string    `json:"recorded_by,omitempty"`
	Status     string    `json:"status"`
	StartedAt  time.Time `json:"started_at"`
	Steps      int       `json:"steps"`
	Reward     *float64  `json:"reward"`
	Review     Review    `json:"review"`
}

// Episodes lists the recorded episodes, newest first. Directories that are
// not episodes are skipped.
func (r *Recorder) Episodes() ([]EpisodeSummary, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("list the episodes: %w", err)
	}
	var out []EpisodeSummary
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(r.dir, e.Name())
		head, err := openMeta(dir)
		if err != nil {
			continue
		}
		rev, err := ReadReview(dir)
		if err != nil {
			rev = Review{Status: ReviewUnreviewed, Note: "the review file cannot be read: " + err.Error()}
		}
		m := head.Meta
		s := EpisodeSummary{ID: m.ID, Dir: e.Name(), Source: m.Source, RecordedBy: m.RecordedBy, Status: m.Status, StartedAt: m.StartedAt,
			Steps: m.Counts.Steps, Review: rev}
		if m.Task != nil {
			s.TaskID = m.Task.ID
		}
		if m.Outcome != nil {
			s.Reward = m.Outcome.Reward
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out, nil
}

// errNoEpisode is an id no episode on disk has.
var errNoEpisode = errors.New("no recorded episode")

// find is the directory of the episode whose episode.json has id.
func (r *Recorder) find(id string) (string, error) {
	// Its directory is usually the id made safe; else look at them all.
	if dir := filepath.Join(r.dir, safeName(id)); hasID(dir, id) {
		return dir, nil
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return "", fmt.Errorf("list the episodes: %w", err)
	}
	for _, e := range entries {
		if dir := filepath.Join(r.dir, e.Name()); e.IsDir() && hasID(dir, id) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w %s: GET /api/recording/episodes lists them", errNoEpisode, wire.Quote(id))
}

func hasID(dir, id string) bool {
	head, err := openMeta(dir)
	return err == nil && head.Meta.ID == id
}

func (r *Recorder) apiEpisodes(w http.ResponseWriter, req *http.Request) {
	all, err := r.Episodes()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// An annotator's list holds its own episodes alone.
	eps := []EpisodeSummary{}
	for _, e := range all {
		if mayTouch(req.Context(), e.RecordedBy) {
			eps = append(eps, e)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"episodes": eps})
}

func (r *Recorder) apiGetReview(w http.ResponseWriter, req *http.Request) {
	if !r.mine(w, req, req.PathValue("id")) {
		return
	}
	dir, err := r.find(req.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	rev, err := ReadReview(dir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rev)
}

func (r *Recorder) apiSetReview(w http.ResponseWriter, req *http.Request) {
	var rev Review
	if err := decodeBody(req, &rev); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !rev.At.IsZero() || rev.By != "" {
		writeError(w, http.StatusBadRequest, "a review's at and by are set by the recorder: send status and note only")
		return
	}
	if !r.mine(w, req, req.PathValue("id")) {
		return
	}
	dir, err := r.find(req.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	rev.By = auth.WhoFrom(req.Context())
	if rev, err = SetReview(dir, rev); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, os.ErrNotExist) {
			status = http.StatusNotFound
		}
		writeError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rev)
}
