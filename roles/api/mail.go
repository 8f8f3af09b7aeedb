package api

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// mailTimeout bounds one SMTP conversation, so a server that stops
// answering cannot hold a request; a shorter request deadline wins.
const mailTimeout = 30 * time.Second

// smtpMailer sends the API's mail (password resets) through the configured
// SMTP server with go-mail, which builds the MIME message and runs the SMTP
// conversation. It upgrades to STARTTLS when the server offers it
// (go-mail's default would refuse a server without it), and PLAIN
// authentication is refused without TLS except to localhost.
type smtpMailer struct {
	host, from string
	port       int
	user, pass string
}

// newMailer returns nil when no SMTP server is configured.
func newMailer(cfg config.Auth) accounts.Mailer {
	if cfg.SMTPHost == "" {
		return nil
	}
	return &smtpMailer{host: cfg.SMTPHost, port: cfg.SMTPPort, from: cfg.SMTPFrom,
		user: cfg.SMTPUsername, pass: cfg.SMTPPassword.Reveal()}
}

func (m *smtpMailer) addr() string { return net.JoinHostPort(m.host, strconv.Itoa(m.port)) }

func (m *smtpMailer) Send(ctx context.Context, to, subject, body string) error {
	// go-mail encodes a subject with line breaks rather than refusing it;
	// refusing keeps a reset mail from carrying a forged header.
	if strings.ContainsAny(to+subject, "\r\n") {
		return fmt.Errorf("send mail: header injection refused")
	}
	// 8bit rather than quoted-printable: the body is short lines of text,
	// and the reset link stays whole for anyone reading the raw mail. No
	// User-Agent: the library's name and version are nobody's business.
	msg := mail.NewMsg(mail.WithEncoding(mail.NoEncoding), mail.WithNoDefaultUserAgent())
	if err := msg.From(m.from); err != nil {
		return fmt.Errorf("send mail: from %q: %w", m.from, err)
	}
	if err := msg.To(to); err != nil {
		return fmt.Errorf("send mail: to %q: %w", to, err)
	}
	msg.Subject(subject)
	msg.SetDate()
	msg.SetBodyString(mail.TypeTextPlain, body)

	opts := []mail.Option{
		mail.WithPort(m.port),
		mail.WithTimeout(mailTimeout),
		mail.WithTLSPolicy(mail.TLSOpportunistic),
		mail.WithTLSConfig(&tls.Config{ServerName: m.host, MinVersion: tls.VersionTLS12}),
	}
	if m.user != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain), mail.WithUsername(m.user), mail.WithPassword(m.pass))
	}
	c, err := mail.NewClient(m.host, opts...)
	if err != nil {
		return fmt.Errorf("send mail via %s: %w", m.addr(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, mailTimeout)
	defer cancel()
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("send mail via %s: %w", m.addr(), err)
	}
	return nil
}
