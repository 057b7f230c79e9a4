package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsScrape scrapes /metrics as Prometheus would, with its own text
// parser, after a reset and an agent's action: the process's series and
// every feature's (hci, control, stream, record) are there, typed right.
func TestMetricsScrape(t *testing.T) {
	d := startDeskenv(t, "--operator-token", testOperator, "--agent-token", testAgent)
	if s, body := request(t, "POST", d.base+"/api/reset", testOperator, strings.NewReader(`{}`)); s != 200 {
		t.Fatalf("reset: %d %s", s, body)
	}
	step := `{"action":{"type":"call_tool","tool_name":"computer","arguments":{"action":"mouse_move","coordinate":[10,10]}}}`
	if s, body := request(t, "POST", d.base+"/step", testOperator, strings.NewReader(step)); s != 200 {
		t.Fatalf("step: %d %s", s, body)
	}

	// The action is counted from the bus on its own goroutine: scrape
	// until it shows (a deadline, not a timing assertion).
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		fams = scrape(t, d.base+"/metrics")
		if agentMoves(fams) == 1 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []struct {
		name string
		kind dto.MetricType
	}{
		{"go_goroutines", dto.MetricType_GAUGE},
		{"process_resident_memory_bytes", dto.MetricType_GAUGE},
		{"deskenv_actions_total", dto.MetricType_COUNTER},             // hci
		{"deskenv_action_duration_seconds", dto.MetricType_HISTOGRAM}, // hci
		{"deskenv_resets_total", dto.MetricType_COUNTER},              // control
		{"deskenv_episode_running", dto.MetricType_GAUGE},             // control
		{"deskenv_viewers", dto.MetricType_GAUGE},                     // stream
		{"deskenv_stream_frames_encoded_total", dto.MetricType_COUNTER},
		{"deskenv_recording", dto.MetricType_GAUGE}, // record
	} {
		f := fams[want.name]
		if f == nil {
			t.Errorf("/metrics lacks %s", want.name)
			continue
		}
		if f.GetType() != want.kind {
			t.Errorf("%s is a %v, want %v", want.name, f.GetType(), want.kind)
		}
	}
	if n := agentMoves(fams); n != 1 {
		t.Errorf(`deskenv_actions_total{action="mouse_move",source="agent"} = %v, want 1`, n)
	}
	if f := fams["deskenv_resets_total"]; f != nil && f.GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Errorf("deskenv_resets_total = %v, want 1", f.GetMetric()[0].GetCounter().GetValue())
	}
}

// scrape reads /metrics with Prometheus's own text parser.
func scrape(t *testing.T, u string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+testOperator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

func agentMoves(fams map[string]*dto.MetricFamily) float64 {
	for _, m := range fams["deskenv_actions_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["action"] == "mouse_move" && labels["source"] == "agent" {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
