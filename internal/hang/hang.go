// Package hang turns a fuzz input that hangs into a failure go test -fuzz
// records. On its own the fuzzer shows a hang only as progress that stops;
// a panic with every goroutine's stack is an input it keeps, minimises and
// replays.
package hang

import (
	"fmt"
	"runtime/debug"
	"time"
)

// After is how long one input may take before it counts as a hang: far above
// any input's honest time, even on a loaded 2-core machine.
const After = 10 * time.Second

// Guard starts the clock for one input; call the returned function when the
// input is done. An input still running after After panics with all stacks.
func Guard(input any) (done func()) {
	tm := time.AfterFunc(After, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("input took more than %v: %.200q", After, fmt.Sprint(input)))
	})
	return func() { tm.Stop() }
}
