package api

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/smtp"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// smtpMailer sends the API's mail (password resets) through the configured
// SMTP server. It upgrades to STARTTLS when the server offers it, and
// net/smtp refuses PLAIN authentication without TLS except to localhost.
type smtpMailer struct {
	addr, from string
	auth       smtp.Auth
}

// newMailer returns nil when no SMTP server is configured.
func newMailer(cfg config.Auth) accounts.Mailer {
	if cfg.SMTPHost == "" {
		return nil
	}
	m := &smtpMailer{addr: net.JoinHostPort(cfg.SMTPHost, strconv.Itoa(cfg.SMTPPort)), from: cfg.SMTPFrom}
	if cfg.SMTPUsername != "" {
		m.auth = smtp.PlainAuth("", cfg.SMTPUsername, cfg.SMTPPassword.Reveal(), cfg.SMTPHost)
	}
	return m
}

func (m *smtpMailer) Send(ctx context.Context, to, subject, body string) error {
	if strings.ContainsAny(to+subject, "\r\n") {
		return fmt.Errorf("send mail: header injection refused")
	}
	msg := "From: " + m.from + "\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nDate: " + time.Now().UTC().Format(time.RFC1123Z) +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.ReplaceAll(body, "\n", "\r\n")
	if err := m.send(ctx, to, msg); err != nil {
		return fmt.Errorf("send mail via %s: %w", m.addr, err)
	}
	return nil
}

// send runs one SMTP conversation under a deadline, so a server that stops
// answering cannot hold a request.
func (m *smtpMailer) send(ctx context.Context, to, msg string) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(m.addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return err
		}
	}
	if m.auth != nil {
		if err := c.Auth(m.auth); err != nil {
			return err
		}
	}
	if err := c.Mail(m.from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(msg)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
