package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/internal/wire"
)

// Register puts the recording API behind the appliance's front door d, for
// operators only. The door checks tokens, origins and body sizes; nothing
// here does.
func (r *Recorder) Register(d *auth.Door) {
	h := r.mux()
	p := auth.Policy{Roles: []auth.Role{auth.RoleOperator}, BodyLimit: maxBody}
	d.Handle("/api/recording", p, h)
	d.Handle("/api/recording/", p, h)
}

// Handler serves the recording API alone behind a door of its own without
// tokens (local mode), which still refuses requests from other origins: for
// tests and programs that embed the recorder.
func (r *Recorder) Handler() http.Handler {
	d := auth.NewDoor(nil, auth.Limits{})
	r.Register(d)
	return d
}

// mux serves the recording API:
//
//	GET  /api/recording          Status
//	POST /api/recording/start    {"episode_id","task_id","instruction","source"}, all optional
//	POST /api/recording/pause    privacy pause
//	POST /api/recording/resume
//	POST /api/recording/stop     {"end_episode": true} has the control plane end and score
//	                             the episode (over the lifecycle bus) and writes its outcome
//	                             in; "reward", "done", "success", "reasons" given beside it
//	                             override the checker's, or stand alone without it
//	GET  /api/recording/episodes and GET/PUT /api/recording/episodes/{id}/review
//	                             the recorded episodes and their reviews (episodes.go)
//
// Answers are JSON: the Status, or {"error": "..."}.
func (r *Recorder) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/recording", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, r.Status())
	})
	mux.HandleFunc("POST /api/recording/start", r.apiStart)
	mux.HandleFunc("POST /api/recording/pause", func(w http.ResponseWriter, req *http.Request) {
		r.answer(w, http.StatusOK, r.Pause(req.Context()))
	})
	mux.HandleFunc("POST /api/recording/resume", func(w http.ResponseWriter, req *http.Request) {
		r.answer(w, http.StatusOK, r.Resume(req.Context()))
	})
	mux.HandleFunc("POST /api/recording/stop", r.apiStop)
	mux.HandleFunc("GET /api/recording/episodes", r.apiEpisodes)
	mux.HandleFunc("GET /api/recording/episodes/{id}/review", r.apiGetReview)
	mux.HandleFunc("PUT /api/recording/episodes/{id}/review", r.apiSetReview)
	mux.HandleFunc("/api/recording/", func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: use GET /api/recording, POST /api/recording/{start,pause,resume,stop}, GET /api/recording/episodes or GET/PUT /api/recording/episodes/{id}/review", req.Method, req.URL.Path))
	})
	return mux
}

const maxBody = 64 << 10

// decodeBody reads an optional JSON object into v; unknown fields are an
// error naming them.
func decodeBody(req *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	if len(body) > maxBody {
		return fmt.Errorf("the request body is over %d bytes", maxBody)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := wire.CheckJSON(body); err != nil {
		return fmt.Errorf("the request body: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// The decoder's message may quote an unknown field whole.
		return fmt.Errorf("the request body must be a JSON object with the documented fields: %s", wire.Prefix(err.Error(), 200))
	}
	return nil
}

func (r *Recorder) apiStart(w http.ResponseWriter, req *http.Request) {
	var info EpisodeInfo
	if err := decodeBody(req, &info); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	_, err := r.Start(req.Context(), info)
	r.answer(w, http.StatusCreated, err)
}

type stopRequest struct {
	// EndEpisode ends and scores the control plane's episode being
	// recorded, and writes its outcome in.
	EndEpisode bool     `json:"end_episode,omitempty"`
	Reward     *float64 `json:"reward,omitempty"`
	Done       *bool    `json:"done,omitempty"`
	Success    *bool    `json:"success,omitempty"`
	Reasons    []string `json:"reasons,omitempty"`
}

func (r *Recorder) apiStop(w http.ResponseWriter, req *http.Request) {
	var sr stopRequest
	if err := decodeBody(req, &sr); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if sr.Reward != nil && (*sr.Reward < 0 || *sr.Reward > 1) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reward %g is out of range: it must be between 0 and 1", *sr.Reward))
		return
	}
	ep, err := r.current()
	if err != nil {
		r.answer(w, http.StatusOK, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 2*time.Minute)
	defer cancel()
	if sr.EndEpisode {
		// The control plane ends and scores the episode; the recording
		// stops on its EpisodeEnded, with these fields over the checker's.
		err = r.endEpisode(ctx, ep.id, &sr)
	} else {
		_, err = r.StopEpisode(ctx, ep.id, overlay(nil, &sr))
	}
	r.answer(w, http.StatusOK, err)
}

// answer writes the status, or the error with a status code that fits it.
func (r *Recorder) answer(w http.ResponseWriter, ok int, err error) {
	switch {
	case err == nil:
		writeJSON(w, ok, r.Status())
	case errors.Is(err, ErrRecording), errors.Is(err, ErrNotRecording):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.As(err, new(invalidError)):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // notes and instructions keep <, > and & as written
	enc.Encode(v)
}

// writeError is the one JSON error every route answers (auth.WriteError).
func writeError(w http.ResponseWriter, status int, msg string) {
	auth.WriteError(w, status, msg)
}
