package record

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/deskenv/deskenv/hci"
)

func TestPyautoguiCode(t *testing.T) {
	amount := func(n int) *int { return &n }
	secs := func(s float64) *float64 { return &s }
	tests := []struct {
		action hci.Action
		want   string
	}{
		{hci.Action{Action: "left_click", Coordinate: []int{512, 200}}, "pyautogui.click(x=0.4004, y=0.2506)"},
		{hci.Action{Action: "left_click", Coordinate: []int{0, 0}, Text: "ctrl+shift"},
			"pyautogui.keyDown('ctrl')\npyautogui.keyDown('shift')\npyautogui.click(x=0.0004, y=0.0006)\npyautogui.keyUp('shift')\npyautogui.keyUp('ctrl')"},
		{hci.Action{Action: "right_click", Coordinate: []int{1279, 799}}, "pyautogui.rightClick(x=0.9996, y=0.9994)"},
		{hci.Action{Action: "double_click", Coordinate: []int{640, 400}}, "pyautogui.doubleClick(x=0.5004, y=0.5006)"},
		{hci.Action{Action: "triple_click", Coordinate: []int{640, 400}}, "pyautogui.tripleClick(x=0.5004, y=0.5006)"},
		{hci.Action{Action: "middle_click", Coordinate: []int{640, 400}}, "pyautogui.middleClick(x=0.5004, y=0.5006)"},
		{hci.Action{Action: "mouse_move", Coordinate: []int{128, 80}}, "pyautogui.moveTo(x=0.1004, y=0.1006)"},
		{hci.Action{Action: "left_click_drag", StartCoordinate: []int{128, 80}, Coordinate: []int{256, 160}},
			"pyautogui.moveTo(x=0.1004, y=0.1006)\npyautogui.dragTo(x=0.2004, y=0.2006, button='left')"},
		{hci.Action{Action: "left_mouse_down"}, "pyautogui.mouseDown(button='left')"},
		{hci.Action{Action: "left_mouse_up", Coordinate: []int{128, 80}}, "pyautogui.moveTo(x=0.1004, y=0.1006)\npyautogui.mouseUp(button='left')"},
		{hci.Action{Action: "scroll", Coordinate: []int{640, 400}, ScrollDirection: "down", ScrollAmount: amount(5)}, "pyautogui.scroll(-5, x=0.5004, y=0.5006)"},
		{hci.Action{Action: "scroll", Coordinate: []int{640, 400}, ScrollDirection: "up", ScrollAmount: amount(2)}, "pyautogui.scroll(2, x=0.5004, y=0.5006)"},
		{hci.Action{Action: "scroll", Coordinate: []int{640, 400}, ScrollDirection: "left", ScrollAmount: amount(1)}, "pyautogui.hscroll(-1, x=0.5004, y=0.5006)"},
		{hci.Action{Action: "type", Text: "it's a <b> & c\\d\n"}, `pyautogui.write('it\'s a <b> & c\\d\n')`},
		{hci.Action{Action: "key", Text: "ctrl+shift+t"}, "pyautogui.hotkey('ctrl', 'shift', 't')"},
		{hci.Action{Action: "key", Text: "Return Return"}, "pyautogui.press('enter')\npyautogui.press('enter')"},
		{hci.Action{Action: "key", Text: "Page_Down"}, "pyautogui.press('pagedown')"},
		{hci.Action{Action: "key", Text: "super"}, "pyautogui.press('win')"},
		{hci.Action{Action: "hold_key", Text: "shift", Duration: secs(0.5)}, "pyautogui.keyDown('shift')\ntime.sleep(0.5)\npyautogui.keyUp('shift')"},
		{hci.Action{Action: "wait", Duration: secs(2)}, "time.sleep(2)"},
		{hci.Action{Action: "screenshot"}, ""},
		{hci.Action{Action: "zoom", Region: []int{0, 0, 10, 10}}, ""},
	}
	for _, tt := range tests {
		got, ok := pyautoguiCode(tt.action, 1280, 800)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s:\n got %q (%v)\nwant %q", tt.action, got, ok, tt.want)
		}
	}
}

// The AgentNet export of recorded episodes is read back line by line and
// checked against a JSON schema of the trajectory shape (a reader this
// project did not write), and keeps typed text byte for byte.
func TestExportAgentNet(t *testing.T) {
	dir := recordTwo(t)
	out := filepath.Join(t.TempDir(), "agentnet.jsonl")
	st, err := Export(context.Background(), dir, out, ExportOptions{Format: "agentnet"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Episodes != 2 {
		t.Fatalf("exported %d episodes, want 2", st.Episodes)
	}
	c := jsonschema.NewCompiler()
	schema, err := c.Compile("testdata/agentnet.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var trajs []Trajectory
	for n := 1; sc.Scan(); n++ {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(sc.Text()))
		if err != nil {
			t.Fatalf("line %d is not JSON: %v", n, err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("line %d does not match the AgentNet trajectory schema: %v", n, err)
		}
		var tr Trajectory
		if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
			t.Fatal(err)
		}
		trajs = append(trajs, tr)
	}
	if len(trajs) != 2 {
		t.Fatalf("%d trajectories in the file, want 2", len(trajs))
	}
	agent := trajs[0]
	if agent.TaskID != "task-a" || agent.TaskCompleted == nil || !*agent.TaskCompleted || len(agent.Traj) != 3 {
		t.Fatalf("the agent's trajectory: %+v", agent)
	}
	// Its task's variant; the other episode had none.
	if agent.Seed == nil || *agent.Seed != 7 || agent.Params["name"] != `bo"b` || agent.Params["n"] != float64(3) {
		t.Errorf("the agent's trajectory: seed %v params %v, want 7 and its parameters", agent.Seed, agent.Params)
	}
	if trajs[1].Seed != nil || trajs[1].Params != nil {
		t.Errorf("the person's trajectory has seed %v params %v, want none", trajs[1].Seed, trajs[1].Params)
	}
	codes := []string{agent.Traj[0].Value.Code, agent.Traj[1].Value.Code, agent.Traj[2].Value.Code}
	want := []string{`pyautogui\.click\(x=0\.0\d{3}, y=0\.0\d{3}\)`, regexp.QuoteMeta(`pyautogui.write('a <b> & c')`), regexp.QuoteMeta(`pyautogui.press('enter')`)}
	for i := range want {
		if !regexp.MustCompile("^" + want[i] + "$").MatchString(codes[i]) {
			t.Errorf("step %d code %q, want %s", i, codes[i], want[i])
		}
	}
	for i, s := range agent.Traj {
		if s.Image == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(out), s.Image)); err != nil {
			t.Errorf("step %d's image %s is not where the path says: %v", i, s.Image, err)
		}
	}
}

// Every pixel written as AgentNet's four-decimal fractions reads back to the
// same pixel through hci.Space.FromFraction, the rule the pyautogui tool uses,
// on the model sizes deskenv scales to and on a wide screen.
func TestAgentNetFractionsRoundTrip(t *testing.T) {
	for _, m := range [][2]int{{1024, 768}, {1280, 800}, {1366, 768}, {3840, 2160}} {
		sp := hci.Space{ScreenW: m[0], ScreenH: m[1], ModelW: m[0], ModelH: m[1]}
		for p := range max(m[0], m[1]) {
			x, y := min(p, m[0]-1), min(p, m[1]-1)
			var fx, fy float64
			xy := normXY([]int{x, y}, m[0], m[1])
			if _, err := fmt.Sscanf(xy, "x=%g, y=%g", &fx, &fy); err != nil {
				t.Fatalf("%v: %q: %v", m, xy, err)
			}
			gx, gy, err := sp.FromFraction(fx, fy)
			if err != nil || gx != x || gy != y {
				t.Fatalf("%v: (%d, %d) written %q reads back as (%d, %d), %v", m, x, y, xy, gx, gy, err)
			}
		}
	}
}
