package baseline

import (
	"errors"
	"testing"
)

// TestOnDisplay decides, from a process's environment, whether a reset
// takes it as the session's on display :5.
func TestOnDisplay(t *testing.T) {
	denied := errors.New("permission denied")
	cases := []struct {
		name  string
		env   []string
		err   error
		byUID bool
		want  bool
	}{
		{"this display", []string{"HOME=/h", "DISPLAY=:5"}, nil, false, true},
		{"this display, screen 0", []string{"DISPLAY=:5.0"}, nil, false, true},
		{"another display", []string{"DISPLAY=:50"}, nil, false, false},
		{"a prefix is not the display", []string{"XDISPLAY=:5"}, nil, false, false},
		{"no DISPLAY", []string{"HOME=/h"}, nil, false, false},
		{"zombie: empty environment", nil, nil, false, false},
		{"unreadable", nil, denied, false, false},
		{"session user: unreadable", nil, denied, true, true},
		{"session user: no DISPLAY", []string{"HOME=/h"}, nil, true, true},
		{"session user: this display", []string{"DISPLAY=:5"}, nil, true, true},
		{"session user: another display", []string{"DISPLAY=:6"}, nil, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := onDisplay(c.env, c.err, ":5", c.byUID); got != c.want {
				t.Errorf("onDisplay(%q, %v, byUID %v) = %v, want %v", c.env, c.err, c.byUID, got, c.want)
			}
		})
	}
}
