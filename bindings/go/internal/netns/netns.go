// SPDX-License-Identifier: MIT

// Package netns runs a package's tests in a network namespace of their own,
// so that nothing they send leaves it: TestMain calls Reexec, which runs
// the test binary again under unshare(1) with only lo, brought up.
package netns

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Main is a package's TestMain: the tests run in the namespace (as root),
// or here, where Need skips those that send.
func Main(m *testing.M) {
	if code, done := Reexec(); done {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// Need skips a test that sends unless it runs in the namespace Main made.
func Need(t testing.TB) {
	t.Helper()
	if !Inside() {
		t.Skip("needs root: runs in a network namespace of its own")
	}
}

const envInside = "GROUPCAST_GO_TEST_NETNS"

// Inside reports whether this process is the re-executed one, inside the
// namespace.
func Inside() bool { return os.Getenv(envInside) == "1" }

// Reexec returns (code, true) after running the test binary in a new
// network namespace, or (0, false) when the caller is that process already
// and should run the tests itself.  Not root: the tests that need the
// namespace skip (Inside reports false).
func Reexec() (int, bool) {
	if Inside() || os.Geteuid() != 0 {
		return 0, false
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		fmt.Fprintln(os.Stderr, "netns: unshare(1) not found (util-linux)")
		return 1, true
	}
	args := append([]string{"-n", "--", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0]}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envInside+"=1")
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), true
		}
		fmt.Fprintln(os.Stderr, "netns:", err)
		return 1, true
	}
	return 0, true
}
