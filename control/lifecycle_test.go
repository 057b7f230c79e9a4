package control

import (
	"context"
	"strings"
	"testing"

	"github.com/deskenv/deskenv/lifecycle"
)

// TestEndRequested: an end asked for on the lifecycle bus (the recorder's
// stop with end_episode) ends and scores the running episode, answered by
// EpisodeEnded with the outcome; one for an episode that does not run is
// answered by EndFailed saying why.
func TestEndRequested(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim, tasks: loadExampleTasks(t)})
	heard := r.listen(t, lifecycle.EpisodeEnded, lifecycle.EndFailed)
	ep, err := r.c.Reset(context.Background(), ResetRequest{TaskID: "hello-file"})
	if err != nil {
		t.Fatal(err)
	}
	r.lc.Publish(lifecycle.Event{Kind: lifecycle.EndRequested, Episode: lifecycle.Episode{ID: "no-such"}})
	r.lc.Publish(lifecycle.Event{Kind: lifecycle.EndRequested, Episode: lifecycle.Episode{ID: ep.ID}})
	failed := heard.of(lifecycle.EndFailed, 1)
	if len(failed) != 1 || failed[0].Episode.ID != "no-such" || !strings.Contains(failed[0].Err, "no-such") {
		t.Errorf("EndFailed heard: %+v, want one for no-such naming it", failed)
	}
	ended := heard.of(lifecycle.EpisodeEnded, 1)
	if len(ended) != 1 || ended[0].Episode.ID != ep.ID || ended[0].Episode.TaskID != "hello-file" ||
		ended[0].Outcome == nil || ended[0].Outcome.Reward == nil || *ended[0].Outcome.Reward != 0 || !ended[0].Outcome.Done {
		t.Fatalf("EpisodeEnded heard: %+v, want %s scored 0 and done", ended, ep.ID)
	}
	if r.c.Current() != nil {
		t.Error("the episode still runs after the end it was asked for")
	}
}
