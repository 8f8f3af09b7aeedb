package cmd

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/coretest/browsertest"
)

// consoleRig is all-in-one with its agent provisioned and polling the
// Modbus simulator (endpoint press-1, device press-1, metric r3 =
// holding register 3 of unit 2, which holds 2003), for the cloud
// console's browser tests.
type consoleRig struct {
	cloudSide
	ports      aioPorts
	modbusPort int
	consoleURL string
	// email and password log the tenant's admin in.
	email, password string
}

func startConsoleRig(t *testing.T) *consoleRig {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs all-in-one, a Modbus server and a browser")
	}
	clearEnv(t)
	t.Setenv("ALLOW_REGISTRATION", "true")
	r := &consoleRig{modbusPort: startModbusSimulator(t), ports: freeAIOPorts(t),
		email: "ops@example.com", password: "correct horse battery"}
	runAllInOne(t, r.ports, filepath.Join(t.TempDir(), "data"))
	r.cloudSide = provisionAgent(t, r.ports.api, fmt.Sprintf("http://127.0.0.1:%d", r.ports.agent))
	r.consoleURL = fmt.Sprintf("http://127.0.0.1:%d/console/", r.ports.api)
	r.waitPlatformConnected(t)
	putJSON(t, r.apiURL+"/agents/"+r.agent+"/target-state", r.access, modbusDoc(r.modbusPort, 500))
	coretest.Eventually(t, 20*time.Second, "readings of press-1 in the cloud", func() bool {
		code, body, err := getWithToken(r.apiURL+"/readings/"+r.agent+"/latest", r.access)
		return err == nil && code == http.StatusOK && strings.Contains(body, "press-1")
	})
	return r
}

// login opens the console in b and logs in as the rig's admin.
func (r *consoleRig) login(b *browsertest.Browser) {
	loginConsole(b, r.consoleURL, r.email, r.password)
}

// loginConsole logs into the console at url through its login form.
func loginConsole(b *browsertest.Browser, url, login, password string) {
	b.Run("open the console", chromedp.Navigate(url))
	b.WaitForPage("the login form", `document.querySelector('#login-submit') !== null`)
	b.Run("log in", chromedp.SendKeys(`input[name=login]`, login), chromedp.SendKeys(`input[name=password]`, password),
		chromedp.Click("#login-submit"))
	b.WaitFor("the console's navigation", `document.querySelector('nav[aria-label=Main] a') !== null`)
}
