package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// child is a running child process (see RunIfChild), ready for load.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// spawn re-executes this binary as a child running spec and waits until it
// says "ready". ctx ending kills it.
func spawn(ctx context.Context, spec childSpec) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting child: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
		stdin.Close()
		return nil, fmt.Errorf("%w: %v", errNoReady, c.cmd.Wait())
	}
	return c, nil
}

// stop tells the child the load is over and reads its report.
func (c *child) stop() (childReport, error) {
	_, _ = io.WriteString(c.stdin, "stop\n")
	c.stdin.Close()
	var rep childReport
	derr := json.NewDecoder(c.out).Decode(&rep)
	if err := c.cmd.Wait(); err != nil {
		return rep, fmt.Errorf("child: %w", err)
	}
	if derr != nil {
		return rep, fmt.Errorf("reading the child's report: %w", derr)
	}
	return rep, nil
}

// kill ends a child whose load failed.
func (c *child) kill() {
	c.stdin.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}
