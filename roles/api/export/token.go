package export

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A download link carries a token "<expiry>.<mac>": the link's expiry in
// Unix seconds and an HMAC-SHA256 of the job id and that expiry under the
// job's own secret (export_jobs.link_secret). The secret never leaves the
// database, so a link cannot be forged or moved to another job; each
// replica verifies it from the row, with no key to share; and a job's
// links die with its row.

// Token errors: errBadToken for anything not signed by the job's secret,
// errLinkExpired for a genuine link past its expiry.
var (
	errBadToken    = errors.New("bad download token")
	errLinkExpired = errors.New("download link expired")
)

// newSecret returns a fresh link secret.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("BUG: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}

func mac(secret, job string, exp int64) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(job + "." + strconv.FormatInt(exp, 10)))
	return h.Sum(nil)
}

// signLink returns the token of a link to job's file valid until exp.
func signLink(secret, job string, exp time.Time) string {
	e := exp.Unix()
	return strconv.FormatInt(e, 10) + "." + base64.RawURLEncoding.EncodeToString(mac(secret, job, e))
}

// verifyLink checks token against job's secret at now and returns its
// expiry. The signature is checked first, so a forged token never learns
// anything about expiry.
func verifyLink(secret, job, token string, now time.Time) (time.Time, error) {
	es, _, ok := strings.Cut(token, ".")
	if !ok {
		return time.Time{}, errBadToken
	}
	e, err := strconv.ParseInt(es, 10, 64)
	if err != nil {
		return time.Time{}, errBadToken
	}
	// The whole token is compared with the one signLink makes: the
	// base64 decoder skips line breaks and ParseInt takes a sign and
	// leading zeros, so decoding the parts would let other spellings of
	// a link open it too.
	exp := time.Unix(e, 0).UTC()
	if !hmac.Equal([]byte(token), []byte(signLink(secret, job, exp))) {
		return time.Time{}, errBadToken
	}
	if !now.Before(exp) {
		return exp, fmt.Errorf("%w at %s", errLinkExpired, exp.Format(time.RFC3339))
	}
	return exp, nil
}
