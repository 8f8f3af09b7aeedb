// Package brokerauth serves the HTTP callbacks an external MQTT broker makes
// to authenticate clients and check their topics: POST /broker-auth/user,
// /broker-auth/superuser and /broker-auth/acl. The decisions are
// core/brokerauth's; this package reads the request contracts of
// mosquitto-go-auth and EMQX 5 and answers each in the form its broker
// reads (a deny is 403 for mosquitto-go-auth but 200 {"result":"deny"}
// for EMQX, which takes any 4xx as "ignore" and may then allow). Only the
// broker may call these routes: the shared secret or an allowed network.
// See docs/broker-auth.md, section Calling the callbacks.
package brokerauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/edgeplat/edgeplat/config"
	bauth "github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/gin-gonic/gin"
)

// The callback routes (absolute, outside /api/v1).
const (
	PathUser      = "/broker-auth/user"
	PathSuperuser = "/broker-auth/superuser"
	PathACL       = "/broker-auth/acl"
)

// SecretHeader carries the shared secret; Authorization: Bearer works too.
const SecretHeader = "X-Broker-Auth-Secret"

// maxBody bounds a callback body. The fields are an API key, a password, a
// client id and a topic: a few hundred bytes in practice.
const maxBody = 16 << 10

// Register adds the three callback routes to r. It fails when
// cfg.AllowedNetworks does not parse.
func Register(r gin.IRoutes, a *bauth.Authorizer, cfg config.BrokerAuth, write httpx.ErrorWriter) error {
	if a == nil || write == nil {
		return errors.New("broker-auth routes need an authorizer and an error writer")
	}
	nets, err := config.ParseCIDRList(cfg.AllowedNetworks)
	if err != nil {
		return fmt.Errorf("broker_auth.allowed_networks: %w", err)
	}
	h := &handler{auth: a}
	guard := newGuard(cfg.Secret, nets, write)
	r.POST(PathUser, guard, h.user)
	r.POST(PathSuperuser, guard, h.superuser)
	r.POST(PathACL, guard, h.acl)
	return nil
}

type handler struct {
	auth *bauth.Authorizer
}

// request holds the fields of both contracts.
type request struct {
	Username string
	Password string
	ClientID string
	Topic    string
	// Acc is mosquitto-go-auth's access, Action EMQX's.
	Acc    string
	Action string
	// emqx is set when the answer must take EMQX's form.
	emqx bool
}

// response is one body both brokers read: mosquitto-go-auth's JSON mode
// looks at ok, EMQX at result and is_superuser, and each ignores the
// other's fields.
type response struct {
	Result      string `json:"result"`
	IsSuperuser bool   `json:"is_superuser"`
	OK          bool   `json:"ok"`
	Error       string `json:"error,omitempty"`
}

func (h *handler) user(c *gin.Context) {
	req, err := readRequest(c)
	if err != nil {
		h.auth.DenyMalformed(c.Request.Context(), bauth.CheckConnect, "", "")
		answer(c, req, false, false)
		return
	}
	id, err := h.auth.Authenticate(c.Request.Context(), req.Username, req.Password, req.ClientID)
	answer(c, req, err == nil, err == nil && id.Superuser)
}

func (h *handler) superuser(c *gin.Context) {
	req, err := readRequest(c)
	if err != nil {
		h.auth.DenyMalformed(c.Request.Context(), bauth.CheckSuperuser, "", "")
		answer(c, req, false, false)
		return
	}
	ok := h.auth.Superuser(c.Request.Context(), req.Username)
	answer(c, req, ok, ok)
}

func (h *handler) acl(c *gin.Context) {
	req, err := readRequest(c)
	var acc bauth.Access
	if err == nil {
		acc, err = req.access()
	}
	if err != nil || req.Topic == "" {
		h.auth.DenyMalformed(c.Request.Context(), bauth.CheckPublish, req.Username, req.ClientID)
		answer(c, req, false, false)
		return
	}
	ok := h.auth.CheckACL(c.Request.Context(), req.Username, req.ClientID, req.Topic, acc)
	answer(c, req, ok, false)
}

// access reads the requested access from acc (mosquitto-go-auth) or action
// (EMQX). Unknown values are errors, and so refusals.
func (r request) access() (bauth.Access, error) {
	switch {
	case r.Action != "" && r.Acc != "":
		return 0, errors.New("both acc and action")
	case r.Action == "publish":
		return bauth.AccessWrite, nil
	case r.Action == "subscribe":
		return bauth.AccessSubscribe, nil
	case r.Action != "":
		return 0, fmt.Errorf("unknown action %q", r.Action)
	}
	n, err := strconv.Atoi(r.Acc)
	if err != nil || n < 1 || n > 7 {
		return 0, fmt.Errorf("acc must be 1..7, got %q", r.Acc)
	}
	return bauth.Access(n), nil
}

// answer writes the decision in the form the calling broker reads.
func answer(c *gin.Context, req request, allow, superuser bool) {
	resp := response{Result: "allow", IsSuperuser: superuser, OK: true}
	status := http.StatusOK
	if !allow {
		resp = response{Result: "deny", Error: "denied"}
		if !req.emqx {
			status = http.StatusForbidden
		}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(status, resp)
}

// readRequest decodes a callback body, JSON or form-encoded by its
// Content-Type. Whatever it returns says which answer form to use, even
// with an error.
func readRequest(c *gin.Context) (request, error) {
	req := request{emqx: c.Query("style") == "emqx"}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, maxBody+1))
	if err != nil {
		return req, fmt.Errorf("read body: %w", err)
	}
	if len(body) > maxBody {
		return req, fmt.Errorf("body over %d bytes", maxBody)
	}
	mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if mt == "application/x-www-form-urlencoded" {
		err = req.fromForm(body)
	} else {
		err = req.fromJSON(body)
	}
	if req.Action != "" {
		req.emqx = true
	}
	return req, err
}

func (r *request) fromForm(body []byte) error {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return fmt.Errorf("parse form: %w", err)
	}
	for _, k := range []string{"username", "password", "clientid", "topic", "acc", "action"} {
		if len(v[k]) > 1 {
			// Two values for one field is ambiguity an attacker could use
			// if the broker and we picked different ones.
			return fmt.Errorf("field %s given %d times", k, len(v[k]))
		}
	}
	r.Username, r.Password, r.ClientID = v.Get("username"), v.Get("password"), v.Get("clientid")
	r.Topic, r.Acc, r.Action = v.Get("topic"), v.Get("acc"), v.Get("action")
	return nil
}

func (r *request) fromJSON(body []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return fmt.Errorf("decode JSON body: %w", err)
	}
	// Keys are matched exactly: encoding/json's case-insensitive matching
	// would let "Username" and "username" both fill one field.
	str := func(key string, dst *string) error {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("field %s: want a string", key)
		}
		return nil
	}
	for key, dst := range map[string]*string{
		"username": &r.Username, "password": &r.Password, "clientid": &r.ClientID,
		"topic": &r.Topic, "action": &r.Action,
	} {
		if err := str(key, dst); err != nil {
			return err
		}
	}
	// mosquitto-go-auth sends acc as a JSON number; a string is accepted
	// too, for brokers templating their bodies.
	if v, ok := raw["acc"]; ok {
		var n json.Number
		if err := json.Unmarshal(v, &n); err == nil {
			r.Acc = n.String()
		} else if err := json.Unmarshal(v, &r.Acc); err != nil {
			return errors.New("field acc: want a number")
		}
	}
	return nil
}

// guard admits a request that carries the shared secret or comes from an
// allowed network. A secret that is sent but wrong is refused even from an
// allowed network: it means a misconfigured broker, which should be loud.
// The network test uses the TCP peer, not X-Forwarded-For: a header any
// client can write must not open these routes.
func newGuard(secret config.Secret, nets []*net.IPNet, write httpx.ErrorWriter) gin.HandlerFunc {
	var want [sha256.Size]byte
	if secret.IsSet() {
		want = sha256.Sum256([]byte(secret.Reveal()))
	}
	return func(c *gin.Context) {
		if got, ok := presented(c.Request); ok && secret.IsSet() {
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
				c.Next()
				return
			}
			refuse(c, write)
			return
		}
		// A request that came through a proxy arrives from the proxy's
		// address, often an allowed one (loopback): only the secret can
		// admit it.
		if !proxied(c.Request) && peerAllowed(c.Request.RemoteAddr, nets) {
			c.Next()
			return
		}
		refuse(c, write)
	}
}

// proxied reports whether a request carries the headers a reverse proxy
// adds; brokers calling directly send none of them.
func proxied(r *http.Request) bool {
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Forwarded-Host"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

func refuse(c *gin.Context, write httpx.ErrorWriter) {
	write(c, http.StatusForbidden, "forbidden", "broker-auth callbacks need the broker's shared secret or an allowed network")
	c.Abort()
}

// presented returns the secret the request carries, if any.
func presented(r *http.Request) (string, bool) {
	if v := r.Header.Get(SecretHeader); v != "" {
		return v, true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") && tok != "" {
		return strings.TrimSpace(tok), true
	}
	return "", false
}

func peerAllowed(remote string, nets []*net.IPNet) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
