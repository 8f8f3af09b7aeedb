package cmd

import (
	"time"

	"github.com/edgeplat/edgeplat/roles/api/brokermon"
	"github.com/edgeplat/edgeplat/roles/broker"
)

// embeddedBrokerStats hands the embedded broker's counters to the API's
// broker monitoring in all-in-one: the roles never import each other.
type embeddedBrokerStats struct{ b *broker.Broker }

// BrokerStats implements brokermon.Source. mochi's names differ from
// Mosquitto's: its messages are PUBLISH packets, its packets every packet.
func (s embeddedBrokerStats) BrokerStats() brokermon.Stats {
	info, ok := s.b.Stats()
	if !ok {
		return brokermon.Stats{}
	}
	return brokermon.Stats{Version: "mochi-mqtt " + info.Version, Values: map[string]float64{
		brokermon.MessagesReceived:    float64(info.PacketsReceived),
		brokermon.MessagesSent:        float64(info.PacketsSent),
		brokermon.PublishReceived:     float64(info.MessagesReceived),
		brokermon.PublishSent:         float64(info.MessagesSent),
		brokermon.PublishDropped:      float64(info.MessagesDropped),
		brokermon.BytesReceived:       float64(info.BytesReceived),
		brokermon.BytesSent:           float64(info.BytesSent),
		brokermon.ClientsConnected:    float64(info.ClientsConnected),
		brokermon.ClientsDisconnected: float64(info.ClientsDisconnected),
		brokermon.ClientsTotal:        float64(info.ClientsTotal),
		brokermon.ClientsMaximum:      float64(info.ClientsMaximum),
		brokermon.Subscriptions:       float64(info.Subscriptions),
		brokermon.Retained:            float64(info.Retained),
		brokermon.Inflight:            float64(info.Inflight),
		brokermon.HeapCurrent:         float64(info.MemoryAlloc),
		brokermon.Threads:             float64(info.Threads),
		brokermon.UptimeSeconds:       float64(time.Now().Unix() - info.Started),
	}}
}

var _ brokermon.Source = embeddedBrokerStats{}
