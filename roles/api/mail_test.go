package api

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestSMTPMailerIntegration sends a reset mail to a real SMTP server:
// Python's smtpd debugging server, which prints what it receives.
func TestSMTPMailerIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-W", "ignore", "-c", "import smtpd").Run(); err != nil {
		coretest.Unavailable(t, "Python's smtpd module (Debian python3 before 3.12)", python, err)
	}
	port := coretest.FreePort(t)
	var out coretest.SyncBuffer
	cmd := exec.Command(python, "-W", "ignore", "-u", "-m", "smtpd", "-n", "-c", "DebuggingServer", "127.0.0.1:"+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	coretest.Eventually(t, 10*time.Second, "the SMTP server to listen", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	m := newMailer(config.Auth{SMTPHost: "127.0.0.1", SMTPPort: port, SMTPFrom: "edgeplat@example.com"})
	if m == nil {
		t.Fatal("no mailer for a configured SMTP host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Send(ctx, "ops@example.com", "Reset your edgeplat password", "Open https://edgeplat.example/reset-password?token=abc\n"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the SMTP server printed:\n%s", out.String())
		}
	})
	coretest.Eventually(t, 5*time.Second, "the server to print the mail", func() bool {
		s := out.String()
		return strings.Contains(s, "Subject: Reset your edgeplat password") && strings.Contains(s, "reset-password?token=abc") &&
			strings.Contains(s, "To: <ops@example.com>")
	})
	if err := m.Send(ctx, "ops@example.com\r\nBcc: x@example.com", "s", "b"); err == nil {
		t.Error("a recipient with a header break was sent")
	}
}
