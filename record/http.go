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
// operators and annotators (operator implies annotator). The door checks
// tokens, origins and body sizes; what an annotator may do with each
// episode is checked here (access.go).
func (r *Recorder) Register(d *auth.Door) {
	h := r.mux()
	p := auth.Policy{Roles: []auth.Role{auth.RoleAnnotator}, BodyLimit: maxBody}
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
//	                             (operators only); {"give_up": true} ends it as a failure
//	GET  /api/recording/episodes and GET/PUT /api/recording/episodes/{id}/review
//	                             the recorded episodes and their reviews (episodes.go)
//	GET  /api/recording/episodes/{id}, GET .../{id}/shots/{file}, GET .../{id}/video/{file}
//	                             one episode's steps, observations and video segments,
//	                             for the review view (episode_view.go)
//	DELETE /api/recording/episodes/{id}
//	                             discard: stop it if it is being recorded, delete its directory
//
// Answers are JSON: the Status, or {"error": "..."}. An annotator sees and
// touches only the recordings and episodes it started (access.go).
func (r *Recorder) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/recording", func(w http.ResponseWriter, req *http.Request) {
		writeJSON(w, http.StatusOK, r.statusFor(req.Context()))
	})
	mux.HandleFunc("POST /api/recording/start", r.apiStart)
	mux.HandleFunc("POST /api/recording/pause", func(w http.ResponseWriter, req *http.Request) {
		if r.mayControl(w, req) {
			r.answerFor(w, req, http.StatusOK, r.Pause(req.Context()))
		}
	})
	mux.HandleFunc("POST /api/recording/resume", func(w http.ResponseWriter, req *http.Request) {
		if r.mayControl(w, req) {
			r.answerFor(w, req, http.StatusOK, r.Resume(req.Context()))
		}
	})
	mux.HandleFunc("POST /api/recording/stop", r.apiStop)
	mux.HandleFunc("GET /api/recording/episodes", r.apiEpisodes)
	mux.HandleFunc("GET /api/recording/episodes/{id}", r.apiEpisode)
	mux.HandleFunc("GET /api/recording/episodes/{id}/shots/{file}", r.apiShot)
	mux.HandleFunc("GET /api/recording/episodes/{id}/video/{file}", r.apiVideo)
	mux.HandleFunc("GET /api/recording/episodes/{id}/review", r.apiGetReview)
	mux.HandleFunc("PUT /api/recording/episodes/{id}/review", r.apiSetReview)
	mux.HandleFunc("DELETE /api/recording/episodes/{id}", r.apiDiscard)
	mux.HandleFunc("/api/recording/", func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: use GET /api/recording, POST /api/recording/{start,pause,resume,stop}, GET /api/recording/episodes, GET /api/recording/episodes/{id}, GET /api/recording/episodes/{id}/{shots,video}/{file}, GET/PUT /api/recording/episodes/{id}/review or DELETE /api/recording/episodes/{id}", req.Method, wire.Prefix(req.URL.Path, 80)))
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
	info.RecordedBy = auth.WhoFrom(req.Context())
	_, err := r.Start(req.Context(), info)
	r.answerFor(w, req, http.StatusCreated, err)
}

type stopRequest struct {
	// EndEpisode ends and scores the control plane's episode being
	// recorded, and writes its outcome in.
	EndEpisode bool     `json:"end_episode,omitempty"`
	Reward     *float64 `json:"reward,omitempty"`
	Done       *bool    `json:"done,omitempty"`
	Success    *bool    `json:"success,omitempty"`
	Reasons    []string `json:"reasons,omitempty"`
	// GiveUp ends the episode as a failure: reward 0, not a success, the
	// reason saying so. The control plane's episode, if the recording is
	// of it, ends too.
	GiveUp bool `json:"give_up,omitempty"`
}

// overrides reports whether sr sets any of the outcome's fields itself.
func (sr *stopRequest) overrides() bool {
	return sr.Reward != nil || sr.Done != nil || sr.Success != nil || len(sr.Reasons) > 0
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
	if sr.overrides() && auth.RoleFrom(req.Context()) == auth.RoleAnnotator {
		// The reward is the checker's: an annotator's demonstration is
		// scored, not self-assessed (give_up is the one verdict it gives).
		writeError(w, http.StatusForbidden, "an annotator token may not set reward, done, success or reasons: finish with end_episode for the checker's reward, or give_up")
		return
	}
	if sr.GiveUp {
		if sr.overrides() {
			writeError(w, http.StatusBadRequest, "give_up sets the outcome itself (reward 0, not a success): leave reward, done, success and reasons out")
			return
		}
		zero, no, yes := 0.0, false, true
		sr.Reward, sr.Success, sr.Done, sr.Reasons = &zero, &no, &yes, []string{"gave up: the demonstrator ended the episode without finishing the task"}
	}
	if !r.mayControl(w, req) {
		return
	}
	ep, err := r.current()
	if err != nil {
		r.answer(w, http.StatusOK, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 2*time.Minute)
	defer cancel()
	if sr.GiveUp && r.opt.Lifecycle != nil && r.cp.isRunning(ep.id) {
		sr.EndEpisode = true
	}
	if sr.EndEpisode {
		// The control plane ends and scores the episode; the recording
		// stops on its EpisodeEnded, with these fields over the checker's.
		err = r.endEpisode(ctx, ep.id, &sr)
	} else {
		_, err = r.StopEpisode(ctx, ep.id, overlay(nil, &sr))
	}
	r.answerFor(w, req, http.StatusOK, err)
}

// answerFor is answer with the status as the caller may see it.
func (r *Recorder) answerFor(w http.ResponseWriter, req *http.Request, ok int, err error) {
	if err == nil {
		writeJSON(w, ok, r.statusFor(req.Context()))
		return
	}
	r.answer(w, ok, err)
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
