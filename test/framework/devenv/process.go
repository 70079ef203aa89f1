package devenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL to the process group.
const stopGrace = 10 * time.Second

// Process is one program the environment started: its own process group, its stdout and stderr
// in <Dir>/<name>.log. It can be stopped, killed and restarted with the same arguments (the e2e
// tests kill and restart the controller and Prometheus).
type Process struct {
	name    string
	path    string
	args    []string
	env     []string
	dir     string
	logPath string
	grace   time.Duration // SIGTERM to SIGKILL

	// onExit is called (once per run, without the lock) when a run exits while nothing asked
	// it to stop (see ExitError); nil for no supervision.
	onExit func(p *Process, err error)

	mu       sync.Mutex
	cmd      *exec.Cmd
	logFile  *os.File
	done     chan struct{} // closed when the current run has exited
	waitErr  error         // the current run's exit error, valid once done is closed
	stopping bool          // Stop or Kill was asked for the current run: its exit is expected
}

// exitTailLines is how many lines of a part's log an ExitError shows.
const exitTailLines = 20

// ExitError reports a process that exited while nothing asked it to stop (Stop, Kill and
// Restart ask): which one, how it ended and the last lines of its log.
type ExitError struct {
	// Name is the process's name (a Part* constant or a StartProcess name).
	Name string
	// Err is the exit status as os/exec reports it ("exit status 3", "signal: killed"), or nil
	// for an exit with status 0.
	Err error
	// LogPath is the process's log file.
	LogPath string
	// Tail is the last lines of the log (at most 20).
	Tail string
}

// Error names the process, its exit status and shows the end of its log.
func (e *ExitError) Error() string {
	status := "exit status 0"
	if e.Err != nil {
		status = e.Err.Error()
	}
	return fmt.Sprintf("%s exited unexpectedly (%s)\n--- last lines of %s ---\n%s\n---", e.Name, status, e.LogPath, e.Tail)
}

// Unwrap returns the exit status error (an *exec.ExitError for a non-zero status).
func (e *ExitError) Unwrap() error { return e.Err }

// exitError describes how the current run ended, with the tail of its log.
func (p *Process) exitError(err error) *ExitError {
	return &ExitError{Name: p.name, Err: err, LogPath: p.logPath, Tail: tailFile(p.logPath, exitTailLines)}
}

// newProcess describes a process without starting it. argv[0] is the program (a path or a name
// looked up in PATH), the rest its arguments; env is added to the environment of this process.
func newProcess(name, logDir string, argv, env []string) (*Process, error) {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("process name %q: must be non-empty and have no path separator", name)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("process %s: no program given", name)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("process %s: %w", name, err)
	}
	return &Process{
		name:    name,
		path:    path,
		args:    append([]string(nil), argv[1:]...),
		env:     append([]string(nil), env...),
		dir:     logDir,
		logPath: filepath.Join(logDir, name+".log"),
		grace:   stopGrace,
	}, nil
}

// StartProcess starts a program the way the environment starts its parts: its own process
// group (Stop reaches its children; it dies with this program), stdout and stderr in
// <logDir>/<name>.log, env added to this process's environment (a later entry wins, so
// "NAME=" clears a variable). For peers and tools that run beside an Env.
func StartProcess(name, logDir string, argv, env []string) (*Process, error) {
	p, err := newProcess(name, logDir, argv, env)
	if err != nil {
		return nil, err
	}
	if err := p.start(true); err != nil {
		return nil, err
	}
	return p, nil
}

// Name is the name the process was started under; its log is <Dir>/<Name>.log.
func (p *Process) Name() string { return p.name }

// LogPath is the file that receives the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Args is the program and its arguments, as started.
func (p *Process) Args() []string { return append([]string{p.path}, p.args...) }

// Pid is the id of the current run (also its process group id), or 0 before the first start.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running tells whether the current run has not exited yet.
func (p *Process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Exited is closed when the current run exits. Each Restart makes a new channel.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// ExitErr is how the current run ended: nil while running or after a clean exit.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return p.waitErr
	default:
		return nil
	}
}

// start runs the program in a new process group; truncate starts a new log, otherwise the run
// appends to it (after a Restart).
func (p *Process) start(truncate bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("process %s: already running as pid %d", p.name, p.cmd.Process.Pid)
		}
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if truncate {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(p.logPath, flags, 0o644)
	if err != nil {
		return fmt.Errorf("process %s: open log: %w", p.name, err)
	}
	_, _ = fmt.Fprintf(f, "=== %s: %s %s\n", time.Now().Format(time.RFC3339), p.path, strings.Join(p.args, " "))
	cmd := exec.Command(p.path, p.args...) //nolint:noctx // a long-lived part: Stop and Kill end it, not a context
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout = f
	cmd.Stderr = f
	// Own process group, so that Stop reaches the children and a terminal's Ctrl-C does not
	// kill the parts before Env.Stop does it in order; Pdeathsig kills the leader if this
	// program dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("process %s: start %s: %w", p.name, p.path, err)
	}
	done := make(chan struct{})
	p.cmd, p.logFile, p.done, p.waitErr, p.stopping = cmd, f, done, nil, false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		expected := p.stopping
		p.mu.Unlock()
		_ = f.Close()
		// Reported before Exited closes, so that whoever waits on Exited finds it reported.
		if !expected && p.onExit != nil {
			p.onExit(p, err)
		}
		close(done)
	}()
	return nil
}

// markStopping records that the current run's exit is asked for, so that it is not reported
// as unexpected.
func (p *Process) markStopping() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
}

// signalGroup sends sig to the process group of the current run; a group that is gone is fine.
func (p *Process) signalGroup(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process %s: signal %v to group %d: %w", p.name, sig, cmd.Process.Pid, err)
	}
	return nil
}

// Stop sends SIGTERM to the process group, waits up to 10 s, then sends SIGKILL. It returns once
// the process has exited; stopping a stopped process does nothing.
func (p *Process) Stop() error {
	done := p.Exited()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		// The leader is gone; children left in its group still get a SIGKILL.
		return p.signalGroup(syscall.SIGKILL)
	default:
	}
	p.markStopping()
	if err := p.signalGroup(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-done:
		return p.signalGroup(syscall.SIGKILL)
	case <-time.After(p.grace):
	}
	return p.Kill()
}

// Kill sends SIGKILL to the process group (a crash, as the e2e tests simulate) and waits for the
// process to exit.
func (p *Process) Kill() error {
	done := p.Exited()
	if done == nil {
		return nil
	}
	p.markStopping()
	if err := p.signalGroup(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(stopGrace):
		return fmt.Errorf("process %s: still running %s after SIGKILL", p.name, stopGrace)
	}
}

// Restart stops the process (if running) and starts it again with the same program, arguments
// and environment, appending to the same log. The new run has a new pid.
func (p *Process) Restart() error {
	if err := p.Stop(); err != nil {
		return err
	}
	return p.start(false)
}

// tailFile returns the last n lines of a file, or a note saying why it could not be read.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	const maxRead = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := st.Size() - maxRead
	if off < 0 {
		off = 0
	}
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
