package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/deskenv/deskenv/internal/wire"
)

// ReviewFile holds an episode's review, beside episode.json rather than in
// it: a review is written long after the recording, by someone else, and
// must never race the recorder's own writes of episode.json.
const ReviewFile = "review.json"

// Review statuses. An episode without a review file is unreviewed.
const (
	ReviewUnreviewed = "unreviewed"
	ReviewAccepted   = "accepted"
	ReviewRejected   = "rejected"
)

// maxReviewNote bounds a review's note: a sentence or a paragraph, not a
// file.
const maxReviewNote = 4096

// Review is a person's verdict on a recorded episode: whether it belongs in
// the training data, and why.
type Review struct {
	Status string    `json:"status"`
	Note   string    `json:"note,omitempty"`
	By     string    `json:"by,omitempty"` // who reviewed: a role or a name
	At     time.Time `json:"at"`
}

// Check reports what is wrong with a review a client sent.
func (r Review) Check() error {
	switch r.Status {
	case ReviewAccepted, ReviewRejected, ReviewUnreviewed:
	default:
		return fmt.Errorf("review status %s is not known: use accepted, rejected or unreviewed", wire.Quote(r.Status))
	}
	if len(r.Note) > maxReviewNote {
		return fmt.Errorf("the review's note is %d bytes; at most %d", len(r.Note), maxReviewNote)
	}
	return wire.CheckString(r.Note)
}

// SetReview writes the review of the episode in dir (atomically: a reader
// sees the old review or the new one). A live episode cannot be reviewed
// yet.
func SetReview(dir string, r Review) (Review, error) {
	if err := r.Check(); err != nil {
		return r, err
	}
	head, err := openMeta(dir)
	if err != nil {
		return r, err
	}
	if head.Live {
		return r, fmt.Errorf("episode %s is still being recorded: review it once it stops", head.Meta.ID)
	}
	if r.At.IsZero() {
		r.At = time.Now().UTC()
	}
	b, err := wire.Marshal(r)
	if err != nil {
		return r, err
	}
	return r, writeFileAtomic(filepath.Join(dir, ReviewFile), append(b, '\n'))
}

// ReadReview is the review of the episode in dir; an episode never reviewed
// has status unreviewed.
func ReadReview(dir string) (Review, error) {
	b, err := os.ReadFile(filepath.Join(dir, ReviewFile))
	if errors.Is(err, os.ErrNotExist) {
		return Review{Status: ReviewUnreviewed}, nil
	}
	if err != nil {
		return Review{}, err
	}
	var r Review
	if err := json.Unmarshal(b, &r); err != nil {
		return Review{}, fmt.Errorf("%s: %w", filepath.Join(dir, ReviewFile), err)
	}
	if err := r.Check(); err != nil {
		return Review{}, fmt.Errorf("%s: %w", filepath.Join(dir, ReviewFile), err)
	}
	return r, nil
}

// reviewFilter is ExportOptions.Review checked: the statuses it keeps.
func reviewFilter(spec string) (map[string]bool, error) {
	if spec == "" {
		return nil, nil
	}
	keep := map[string]bool{}
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		switch s {
		case ReviewAccepted, ReviewRejected, ReviewUnreviewed:
			keep[s] = true
		default:
			return nil, fmt.Errorf("review %s is not known: use accepted, rejected or unreviewed (or several, comma-separated)", wire.Quote(s))
		}
	}
	return keep, nil
}
