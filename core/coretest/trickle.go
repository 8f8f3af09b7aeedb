package coretest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TrickleBody posts to path on addr a body announced at 600 bytes and sent
// a byte every 100 ms, a minute in all, with the given header lines
// ("Authorization: Bearer ..."), and returns the answer and its body. A
// server with a body timeout answers long before; no answer within 20 s
// fails the test.
func TrickleBody(t testing.TB, addr, path string, header ...string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 600
	var extra strings.Builder
	for _, h := range header {
		extra.WriteString(h + "\r\n")
	}
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, extra.String(), size); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range size {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	// Far more than any body timeout a test sets, far less than the trickle.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to POST %s while the body trickled: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer to POST %s: %v", path, err)
	}
	return resp, string(body)
}
