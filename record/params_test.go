package record

import (
	"context"
	"reflect"
	"testing"

	"github.com/deskenv/deskenv/lifecycle"
)

// TestMetaCarriesParams records the control plane's running episode: its
// seed and the values it chose for the task's parameters land in
// episode.json's task, as Open reads them back.
func TestMetaCarriesParams(t *testing.T) {
	r := newRig(t, 640, 480, "")
	lc := lifecycle.NewBus()
	t.Cleanup(func() { lc.Close() })
	fakePlane(t, lc, 1)
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1, Lifecycle: lc})
	seed := int64(11)
	params := map[string]any{"name": "bob", "n": int64(7)}
	lc.Publish(lifecycle.Event{Kind: lifecycle.EpisodeStarted, Episode: lifecycle.Episode{ID: "ep-p", TaskID: "calc", Instruction: "sum 7", Seed: &seed, Params: params}})
	ep, err := rec.Start(context.Background(), EpisodeInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Stop(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	got, err := Open(ep.Dir())
	if err != nil {
		t.Fatal(err)
	}
	tk := got.Meta.Task
	if tk == nil || tk.ID != "calc" || tk.Seed == nil || *tk.Seed != 11 || !reflect.DeepEqual(tk.Params, map[string]any{"name": "bob", "n": float64(7)}) {
		t.Fatalf("episode.json task = %+v", tk)
	}
}
