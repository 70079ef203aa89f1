package policysim

import "testing"

// PanicMax holds until one request per Ready replica queues, then asks for its maximum and
// keeps it, whatever it sees after.
func TestPanicMaxGoesToItsMaximumAtTheFirstQueueAndStays(t *testing.T) {
	p := &PanicMax{Max: 30}
	if n := p.Decide(Signals{Pods: 6, Ready: 6, Waiting: 5}); n != 6 {
		t.Fatalf("%d with 5 queued on 6 Ready, want 6 held", n)
	}
	if n := p.Decide(Signals{Pods: 6, Ready: 6, Waiting: 6}); n != 30 {
		t.Fatalf("%d with 6 queued on 6 Ready, want 30", n)
	}
	if n := p.Decide(Signals{Pods: 30, Ready: 30}); n != 30 {
		t.Fatalf("%d with nothing queued after, want 30 kept", n)
	}
}
