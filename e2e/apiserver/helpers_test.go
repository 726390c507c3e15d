package apiserver_e2e

import (
	"bytes"
	"regexp"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writing process and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, b *syncBuffer, pattern string) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if re.MatchString(b.String()) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("watch output never matched %q:\n%s", pattern, b.String())
}
