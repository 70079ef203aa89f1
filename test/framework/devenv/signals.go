package devenv

import (
	"os"
	"os/signal"
	"syscall"
)

// StopOnSignals stops the environment when this program receives one of sigs (by default
// SIGINT, SIGTERM and SIGHUP: Ctrl-C, kill, a closed terminal), then delivers the signal again
// with its default action, so that the program ends as it would have without the handler but
// leaves no process behind. The parts run in their own process groups, so a Ctrl-C in a
// terminal reaches only this program, which stops them in order. Call the returned function to
// remove the handler (after Stop, for instance).
func (e *Env) StopOnSignals(sigs ...os.Signal) (release func()) {
	if len(sigs) == 0 {
		sigs = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	quit := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			e.log.Info("Stopping on signal", "signal", sig.String())
			e.Stop()
			signal.Reset(sig)
			if s, ok := sig.(syscall.Signal); ok {
				_ = syscall.Kill(os.Getpid(), s)
			}
		case <-quit:
		}
	}()
	var done bool
	return func() {
		if done {
			return
		}
		done = true
		signal.Stop(ch)
		close(quit)
	}
}
