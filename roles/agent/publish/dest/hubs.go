package dest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Canonical topics of the hubs, used when a subscription gives no
// route_json.topic.
const (
	// HubATopic follows AWS's topic design guidance for telemetry
	// ("dt/<application>/<thing>/<data type>").
	HubATopic = "dt/edgeplat/{thingName}/telemetry"
	// HubBTopic is Azure IoT Hub's device-to-cloud topic; the hub routes
	// anything else away.
	HubBTopic = "devices/{deviceId}/messages/events/"
	// HubCTopic is the default custom "update" topic of an Alibaba Cloud
	// IoT Platform product.
	HubCTopic = "/{productKey}/{deviceName}/user/update"
)

// azureAPIVersion is the IoT Hub MQTT API version the username names.
const azureAPIVersion = "2021-04-12"

// connParams is what one MQTT connection needs, made fresh for each
// client, so that time-limited credentials can be renewed.
type connParams struct {
	URL      string
	Username string
	Password string
	ClientID string
	CAFile   string
	CertFile string
	KeyFile  string
	// Expires is when the credentials stop working; zero when they do not.
	Expires time.Time
}

// mqttBuilder is the per-type part of an MQTT-family destination.
type mqttBuilder interface {
	// connection builds the connection parameters as of now.
	connection(id int64, now time.Time) connParams
	// topicVars are the placeholders a route topic may use besides
	// {mqttTopic}.
	topicVars() map[string]string
	// canonicalTopic is the topic when the route topic is empty; "" means
	// the route topic is required.
	canonicalTopic() string
	qos() byte
	// maxPayload is the largest message the broker takes, 0 for no known
	// limit. A hub closes the connection on a larger one, which would look
	// like an outage and hold up the queue behind it for ever.
	maxPayload() int
}

// The message size limits of the cloud hubs, as they document them.
const (
	HubAMaxPayload = 128 << 10 // AWS IoT Core
	HubBMaxPayload = 256 << 10 // Azure IoT Hub (device-to-cloud)
	HubCMaxPayload = 256 << 10 // Alibaba Cloud IoT Platform
)

func (c mqttConfig) maxPayload() int { return 0 }
func (c hubAConfig) maxPayload() int { return HubAMaxPayload }
func (c hubBConfig) maxPayload() int { return HubBMaxPayload }
func (c hubCConfig) maxPayload() int { return HubCMaxPayload }

func (c mqttConfig) connection(id int64, _ time.Time) connParams {
	cid := c.ClientID
	if cid == "" {
		// Stable across restarts, unique per destination of the device.
		cid = "edgeplat-dest-" + strconv.FormatInt(id, 10)
	}
	return connParams{URL: c.URL, Username: c.Username, Password: c.Password, ClientID: cid,
		CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile}
}
func (c mqttConfig) topicVars() map[string]string { return nil }
func (c mqttConfig) canonicalTopic() string       { return "" }
func (c mqttConfig) qos() byte                    { return qosOf(c.QoS) }

func (c hubAConfig) connection(_ int64, _ time.Time) connParams {
	return connParams{URL: hostPort("ssl", c.Endpoint, portOr(c.Port, DefaultHubPort)), ClientID: c.ThingName,
		CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile}
}
func (c hubAConfig) topicVars() map[string]string { return map[string]string{"thingName": c.ThingName} }
func (c hubAConfig) canonicalTopic() string       { return HubATopic }
func (c hubAConfig) qos() byte                    { return qosOf(c.QoS) }

func (c hubBConfig) ttl() time.Duration {
	return time.Duration(portOr(c.TokenTTLSeconds, DefaultTokenTTLSeconds)) * time.Second
}

func (c hubBConfig) connection(_ int64, now time.Time) connParams {
	expires := now.Add(c.ttl()).Truncate(time.Second)
	return connParams{
		URL:      hostPort("ssl", c.HostName, portOr(c.Port, DefaultHubPort)),
		Username: c.HostName + "/" + c.DeviceID + "/?api-version=" + azureAPIVersion,
		Password: SASToken(c.HostName+"/devices/"+c.DeviceID, c.SharedAccessKey, expires),
		ClientID: c.DeviceID,
		CAFile:   c.CAFile,
		Expires:  expires,
	}
}
func (c hubBConfig) topicVars() map[string]string { return map[string]string{"deviceId": c.DeviceID} }
func (c hubBConfig) canonicalTopic() string       { return HubBTopic }
func (c hubBConfig) qos() byte                    { return qosOf(c.QoS) }

// SASToken is an Azure shared access signature for resource (for a
// device, "{hostName}/devices/{deviceId}") signed with the base64 key,
// valid until expires: the signature is the HMAC-SHA256 of the URL-escaped
// resource, a newline and the expiry in Unix seconds. A key that is not
// base64 (Validate refuses it) signs as its raw bytes.
func SASToken(resource, key string, expires time.Time) string {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		k = []byte(key)
	}
	sr := url.QueryEscape(resource)
	se := strconv.FormatInt(expires.Unix(), 10)
	m := hmac.New(sha256.New, k)
	m.Write([]byte(sr + "\n" + se))
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	return "SharedAccessSignature sr=" + sr + "&sig=" + url.QueryEscape(sig) + "&se=" + se
}

func (c hubCConfig) host() string {
	if c.Host != "" {
		return c.Host
	}
	return c.ProductKey + ".iot-as-mqtt." + c.RegionID + ".aliyuncs.com"
}

func (c hubCConfig) connection(_ int64, now time.Time) connParams {
	cid := c.ClientID
	if cid == "" {
		cid = c.DeviceName
	}
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	return connParams{
		URL:      hostPort("ssl", c.host(), portOr(c.Port, DefaultHubPort)),
		Username: c.DeviceName + "&" + c.ProductKey,
		Password: AliyunSign(c.DeviceSecret, cid, c.DeviceName, c.ProductKey, ts),
		ClientID: fmt.Sprintf("%s|securemode=2,signmethod=hmacsha256,timestamp=%s|", cid, ts),
		CAFile:   c.CAFile,
	}
}
func (c hubCConfig) topicVars() map[string]string {
	return map[string]string{"productKey": c.ProductKey, "deviceName": c.DeviceName}
}
func (c hubCConfig) canonicalTopic() string { return HubCTopic }
func (c hubCConfig) qos() byte              { return qosOf(c.QoS) }

// AliyunSign is the MQTT password of an Alibaba Cloud IoT Platform device:
// the lower-case hex HMAC-SHA256, keyed with the device secret, of
// "clientId{clientId}deviceName{deviceName}productKey{productKey}timestamp{ms}".
func AliyunSign(deviceSecret, clientID, deviceName, productKey, timestampMs string) string {
	m := hmac.New(sha256.New, []byte(deviceSecret))
	m.Write([]byte("clientId" + clientID + "deviceName" + deviceName + "productKey" + productKey + "timestamp" + timestampMs))
	return hex.EncodeToString(m.Sum(nil))
}

// platformBuilder connects with the device's provisioned credentials.
type platformBuilder struct{ creds PlatformCredentials }

func (p platformBuilder) connection(id int64, _ time.Time) connParams {
	cid := p.creds.ClientID
	if cid == "" {
		cid = "edgeplat-dest-" + strconv.FormatInt(id, 10)
	}
	return connParams{URL: p.creds.BrokerURL, Username: p.creds.Username, Password: p.creds.Password,
		ClientID: cid, CAFile: p.creds.CAFile}
}
func (platformBuilder) topicVars() map[string]string { return nil }
func (platformBuilder) canonicalTopic() string       { return "" }
func (platformBuilder) qos() byte                    { return 1 }
func (platformBuilder) maxPayload() int              { return 0 }
