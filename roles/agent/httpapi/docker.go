package httpapi

import (
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"
)

// MaskedKey stands for the runtime's TLS key in answers: the key is
// write-only. A client that sends the mask back (the form it read,
// resubmitted) keeps the stored key.
const MaskedKey = "********"

// Runtime connection types of RuntimeConfig.Type.
const (
	RuntimeSocket = "socket"
	RuntimeTCP    = "tcp"
	RuntimeTLS    = "tcp+tls"
)

// dockerRoutes are the handlers of the runtime configuration routes.
type dockerRoutes struct{ routes }

func registerDocker(g *gin.RouterGroup, d Deps) {
	r := dockerRoutes{routes{Deps: d}}
	g.GET("/docker/config", r.getConfig)
	g.POST("/docker/config", r.setConfig)
	g.POST("/docker/test", r.test)
}

func (r dockerRoutes) getConfig(c *gin.Context) {
	cfg, err := r.Apps.RuntimeConfig(c.Request.Context())
	if err != nil {
		r.respond(c, "read runtime config", err)
		return
	}
	if cfg.Key != "" {
		cfg.Key = MaskedKey
	}
	c.JSON(http.StatusOK, cfg)
}

func (r dockerRoutes) setConfig(c *gin.Context) {
	cfg, ok := r.bindConfig(c)
	if !ok {
		return
	}
	if err := r.Apps.SetRuntimeConfig(c.Request.Context(), cfg); err != nil {
		r.runtimeFailed(c, "save runtime config", err)
		return
	}
	r.Log.Info("runtime config saved", "type", cfg.Type, "socket", cfg.SocketPath, "host", cfg.Host, "port", cfg.Port)
	c.JSON(http.StatusOK, gin.H{"ok": true})
}

func (r dockerRoutes) test(c *gin.Context) {
	cfg, ok := r.bindConfig(c)
	if !ok {
		return
	}
	res, err := r.Apps.TestRuntime(c.Request.Context(), cfg)
	if err != nil {
		r.runtimeFailed(c, "test runtime", err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// bindConfig reads and checks a RuntimeConfig body, putting the stored
// key in place of the mask.
func (r dockerRoutes) bindConfig(c *gin.Context) (RuntimeConfig, bool) {
	var cfg RuntimeConfig
	if !bind(c, &cfg) {
		return cfg, false
	}
	if err := checkRuntimeConfig(cfg); err != nil {
		fail(c, http.StatusBadRequest, "%s", oneLine(err))
		return cfg, false
	}
	if cfg.Key == MaskedKey {
		stored, err := r.Apps.RuntimeConfig(c.Request.Context())
		if err != nil {
			r.respond(c, "read runtime config", err)
			return cfg, false
		}
		if stored.Key == "" {
			fail(c, http.StatusBadRequest, "key: no key is stored to keep; paste the PEM key")
			return cfg, false
		}
		cfg.Key = stored.Key
	}
	return cfg, true
}

func (r dockerRoutes) runtimeFailed(c *gin.Context, what string, err error) {
	if errors.Is(err, ErrRuntimeDown) {
		fail(c, http.StatusServiceUnavailable, "%s", err.Error())
		return
	}
	r.respond(c, what, err)
}

// checkRuntimeConfig checks the fields of a RuntimeConfig that its type
// uses, and that it sets no other; defaults (socket path, ports) are the
// implementation's.
func checkRuntimeConfig(cfg RuntimeConfig) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	unused := func(fields ...string) {
		set := map[string]bool{"socketPath": cfg.SocketPath != "", "host": cfg.Host != "", "port": cfg.Port != 0,
			"ca": cfg.CA != "", "cert": cfg.Cert != "", "key": cfg.Key != ""}
		for _, f := range fields {
			if set[f] {
				add(f, "is not used with type %q; leave it out", cfg.Type)
			}
		}
	}
	switch cfg.Type {
	case RuntimeSocket:
		if cfg.SocketPath != "" && (!strings.HasPrefix(cfg.SocketPath, "/") || path.Clean(cfg.SocketPath) != cfg.SocketPath) {
			add("socketPath", "must be a clean absolute path, got %q", clipParam(cfg.SocketPath))
		}
		unused("host", "port", "ca", "cert", "key")
	case RuntimeTCP, RuntimeTLS:
		switch {
		case cfg.Host == "":
			add("host", "is required")
		case net.ParseIP(strings.Trim(cfg.Host, "[]")) == nil && strings.ContainsAny(cfg.Host, " /:[]"):
			add("host", "must be a host name or IP address without scheme, port or path, got %q", clipParam(cfg.Host))
		}
		if cfg.Port < 0 || cfg.Port > 65535 {
			add("port", "must be 1..65535 (0 or absent: the default), got %d", cfg.Port)
		}
		unused("socketPath")
		if cfg.Type == RuntimeTCP {
			unused("ca", "cert", "key")
			break
		}
		checkPEM := func(field, v string, required bool) {
			switch {
			case v == "" && required:
				add(field, "is required with type %q (PEM)", RuntimeTLS)
			case v == "" || v == MaskedKey:
			default:
				if b, _ := pem.Decode([]byte(v)); b == nil {
					add(field, "is not PEM (-----BEGIN ...-----)")
				}
			}
		}
		checkPEM("ca", cfg.CA, true)
		checkPEM("cert", cfg.Cert, cfg.Key != "")
		checkPEM("key", cfg.Key, cfg.Cert != "")
	case "":
		add("type", "is required: %s, %s or %s", RuntimeSocket, RuntimeTCP, RuntimeTLS)
	default:
		add("type", "must be %s, %s or %s, got %q", RuntimeSocket, RuntimeTCP, RuntimeTLS, clipParam(cfg.Type))
	}
	return errors.Join(errs...)
}
