package coretest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// MQTTAddr returns the host:port of the MQTT broker (Mosquitto) that
// integration tests use: EDGEPLAT_TEST_MQTT_ADDR, or 127.0.0.1:1883. It
// skips the test in -short mode, and skips it (fails it when services are
// required) unless an MQTT 3.1.1 CONNECT there is accepted. The check speaks
// the protocol over a plain connection so that no client library is needed.
func MQTTAddr(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an MQTT broker, skipped in -short mode")
	}
	addr := Addr("EDGEPLAT_TEST_MQTT_ADDR", "127.0.0.1:1883")
	if err := pingMQTT(addr); err != nil {
		Unavailable(t, "MQTT broker", addr, err)
	}
	return addr
}

// pingMQTT connects with a clean session and a random client id, expects
// an accepting CONNACK and disconnects.
func pingMQTT(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	clientID := "edgeplat-probe-" + hex.EncodeToString(id[:])
	// Variable header: protocol name "MQTT", level 4, flags clean session,
	// keepalive 10 s; payload: the client id.
	body := []byte{0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 10, 0, byte(len(clientID))}
	body = append(body, clientID...)
	pkt := append([]byte{0x10, byte(len(body))}, body...)
	if _, err := c.Write(pkt); err != nil {
		return fmt.Errorf("write CONNECT: %w", err)
	}
	var ack [4]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return fmt.Errorf("read CONNACK: %w", err)
	}
	if ack[0] != 0x20 || ack[1] != 2 {
		return fmt.Errorf("expected CONNACK, got % x", ack)
	}
	if ack[3] != 0 {
		return errors.New("CONNECT refused with return code " + fmt.Sprint(ack[3]))
	}
	_, _ = c.Write([]byte{0xE0, 0}) // DISCONNECT
	return nil
}
