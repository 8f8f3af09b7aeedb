package broker

import "github.com/mochi-mqtt/server/v2/system"

// Stats returns a copy of the broker's own counters (mochi's $SYS
// figures), read in process, so the Cloud API's broker monitoring in
// all-in-one needs no $SYS subscription; false before Start. mochi
// refreshes the uptime, memory and threads figures once a second.
func (b *Broker) Stats() (system.Info, bool) {
	if b.server == nil {
		return system.Info{}, false
	}
	return *b.server.Info.Clone(), true
}
