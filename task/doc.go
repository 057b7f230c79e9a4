// Package task reads task files and turns a desktop's state into a reward.
//
// A task file is one JSON object: an id, the instruction given to the agent,
// setup steps that prepare the desktop, and an evaluator, a tree of checks
// that judges the result. docs/TASKS.md describes every field; the example
// set lives in tasks/.
//
//	{
//	  "id": "hello-file",
//	  "instruction": "Create ~/hello.txt containing: hello world",
//	  "setup": [
//	    {"type": "launch", "argv": ["xterm", "-T", "work"]},
//	    {"type": "wait_window", "contains": "work"}
//	  ],
//	  "evaluator": {"type": "file_contains", "path": "~/hello.txt", "contains": "hello world"},
//	  "solution": [{"action": "type", "text": "echo hello world > ~/hello.txt"}, {"action": "key", "text": "Return"}]
//	}
//
// Load reads a directory of such files and Parse one file. Both are strict:
// an unknown field, a field the step or check type does not use, a value of
// the wrong type, an invalid regular expression or a missing screen_region
// reference is an error that names the file, line, column and field path,
// such as
//
//	tasks/edit.json:12:9: evaluator.checks[1].path: required: the file, such as "~/notes.txt"
//
// # Kinds
//
// Each step and check type is one entry in a table of kinds: the fields it
// takes and needs, how it is described and how it runs or evaluates. Parse
// and Load use the built-in kinds; DefaultKinds returns them as a Kinds a
// program extends with AddCheck, then parses with its Parse and Load. A new
// checker is one CheckKind and its Evaluate function.
//
// # Rewards
//
// Leaf checks give 1 when they hold and 0 when they do not. "and" gives the
// minimum of its checks' rewards, so 1 only when every check passes; with
// "partial": true it gives their mean weighted by each check's "weight"
// (default 1) instead. "or" gives the maximum, "not" one minus its check's
// reward. A check passes when its reward is 1, and a task succeeds when its
// evaluator passes. Evaluate runs every check, so the Outcome's Reasons say
// everything that was wrong, one Reason per check, the root first.
//
// # Environment
//
// Setup and checks reach the desktop through an Env. NewEnv makes one for a
// *display.Display: commands run with sh -c in the desktop user's home with
// the desktop's environment (DISPLAY set); "~" in paths is that home; window
// titles are read over an X connection of the Env's own; selections are read
// the way a pasting client reads them; screen_region compares against a
// screenshot function given by the caller, or a plain GetImage. Programs that
// setup launches keep running until DisplayEnv.CloseLaunched, which the caller
// invokes when it resets the desktop.
//
// A check that cannot look at all (the X server does not answer, a command
// cannot start) counts as failed and also makes Evaluate return an error, so
// a broken environment is not mistaken for a failed task.
package task
