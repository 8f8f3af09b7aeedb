package brokerusers

import (
	"context"
	"strings"

	"github.com/edgeplat/edgeplat/core/brokerauth"
)

// deviceKeyScheme starts every device API key (registry's key format,
// dk2_{kid}_{secret}); no broker username can start with it.
const deviceKeyScheme = "dk2_"

// CombinedStore returns the brokerauth.Store the Cloud API's authorizer
// uses: a username that is a device API key (it starts with "dk2_") goes to
// devices (registry.Store), any other to the broker users of users. The
// usernames cannot overlap, since broker usernames starting with "dk2_"
// are refused, so each username has one store that can answer for it.
func CombinedStore(devices brokerauth.Store, users *Store) brokerauth.Store {
	if devices == nil || users == nil {
		panic("BUG: brokerusers.CombinedStore needs a device store and a broker user store")
	}
	return &combined{devices: devices, users: users}
}

type combined struct {
	devices brokerauth.Store
	users   *Store
}

// AuthenticateDevice implements brokerauth.Store.
func (c *combined) AuthenticateDevice(ctx context.Context, username, password string) (brokerauth.Identity, error) {
	if strings.HasPrefix(username, deviceKeyScheme) {
		return c.devices.AuthenticateDevice(ctx, username, password)
	}
	return c.users.AuthenticateBrokerUser(ctx, username, password)
}

var _ brokerauth.Store = (*combined)(nil)
