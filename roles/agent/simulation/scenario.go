package simulation

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Signal is one value a simulated device produces: a field of its frame
// and the register of the data point that reads it.
type Signal struct {
	Name string
	Unit string
}

// Sample is one signal's value at one poll. A sample with a Code is a BAD
// reading whose quality code is Code.
type Sample struct {
	Signal string
	Value  float64
	Code   string
}

// Frame is what a simulated device answers to one poll. Down means the
// device is gone: the poll fails like a lost TCP peer and the device
// refuses connections for the scenario's outage duration. A signal
// missing from Samples vanished from the device's frame.
type Frame struct {
	Samples []Sample
	Down    bool
}

// Generator produces a device's frames, one per poll. Two generators of
// the same scenario and seed produce the same frames.
type Generator interface {
	Next() Frame
}

// Scenario is a named simulation: its devices' signals, how they are
// polled, and the generator of each device.
type Scenario struct {
	Name        string
	Description string
	Signals     []Signal
	// Devices is how many simulated devices a start creates; device i
	// is generated with seed+i.
	Devices int
	// PollInterval is the simulated endpoints' poll_interval.
	PollInterval time.Duration
	// Outage is how long a device that went down refuses connections.
	Outage time.Duration
	gen    func(seed uint64) Generator
}

// NewGenerator builds the scenario's generator for seed.
func (s Scenario) NewGenerator(seed uint64) Generator { return s.gen(seed) }

// hasSignal reports whether name is one of the scenario's signals.
func (s Scenario) hasSignal(name string) bool {
	return slices.ContainsFunc(s.Signals, func(sg Signal) bool { return sg.Name == name })
}

func (s Scenario) signalNames() []string {
	out := make([]string, len(s.Signals))
	for i, sg := range s.Signals {
		out[i] = sg.Name
	}
	return out
}

// Tuning of the scenarios; docs/simulation.md describes the signals.
const (
	pollInterval = time.Second
	// sinePeriod is the steady temperature's period in polls.
	sinePeriod = 60
	// rampPerPoll is the drift scenario's temperature rise per poll.
	rampPerPoll = 0.02
	// faultStepEvery is how many polls a fault level lasts; every
	// faultBadEvery-th poll, the first included, has a BAD reading.
	faultStepEvery = 15
	faultBadEvery  = 4
	// outageUp bounds the polls an outage device answers before it goes
	// down: outageUpMin plus up to outageUpSpread more, drawn per cycle.
	outageUpMin    = 10
	outageUpSpread = 10
	outageDown     = 5 * time.Second
	// vanishAfter is the poll from which the schema-drift device's frame
	// lacks its vanishing field: past the drift detector's warm-up of 20
	// batches (docs/drift.md), so the field is expected when it goes.
	vanishAfter    = 30
	vanishingField = "humidity"
)

var (
	sigTemperature = Signal{Name: "temperature", Unit: "C"}
	sigPressure    = Signal{Name: "pressure", Unit: "bar"}
	sigHumidity    = Signal{Name: "humidity", Unit: "%"}
)

// faultCodes are the quality codes the fault scenario's BAD readings
// carry (roles/agent/adapters/quality.go).
var faultCodes = []string{adapters.CodeDeviceBusy, adapters.CodeBadData, adapters.CodeTimeout, adapters.CodeReadError}

// faultLevels are the fault scenario's temperature steps, added to its base.
var faultLevels = []float64{0, 12, -8, 25}

// Scenarios is the catalogue, in the order status lists it.
var Scenarios = []Scenario{
	{
		Name:        "steady",
		Description: "two devices whose temperature and pressure follow slow sine waves with a little noise",
		Signals:     []Signal{sigTemperature, sigPressure}, Devices: 2, PollInterval: pollInterval,
		gen: func(seed uint64) Generator { return &steady{rng: newRand(seed)} },
	},
	{
		Name:        "drift",
		Description: "a device whose temperature ramps up slowly (0.02 C per poll) while its pressure stays steady",
		Signals:     []Signal{sigTemperature, sigPressure}, Devices: 1, PollInterval: pollInterval,
		gen: func(seed uint64) Generator { return &drift{steady: steady{rng: newRand(seed)}} },
	},
	{
		Name:        "fault",
		Description: "a device whose temperature steps between levels every 15 polls and which sends a BAD reading every 4th poll",
		Signals:     []Signal{sigTemperature, sigPressure}, Devices: 1, PollInterval: pollInterval,
		gen: func(seed uint64) Generator { return &fault{steady: steady{rng: newRand(seed)}} },
	},
	{
		Name:        "outage",
		Description: "a device that answers 10 to 19 polls, then disappears for 5 s (connections refused) and comes back, again and again",
		Signals:     []Signal{sigTemperature, sigPressure}, Devices: 1, PollInterval: pollInterval, Outage: outageDown,
		gen: func(seed uint64) Generator { o := &outage{steady: steady{rng: newRand(seed)}}; o.plan(); return o },
	},
	{
		Name:        "schema-drift",
		Description: "a device whose frame loses its humidity field after 30 polls",
		Signals:     []Signal{sigTemperature, sigPressure, sigHumidity}, Devices: 1, PollInterval: pollInterval,
		gen: func(seed uint64) Generator { return &schemaDrift{steady: steady{rng: newRand(seed)}} },
	},
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return Scenarios[i], true
}

// Names lists the scenarios' names.
func Names() []string {
	out := make([]string, len(Scenarios))
	for i, s := range Scenarios {
		out[i] = s.Name
	}
	return out
}

// newRand is the generators' source: PCG seeded from seed alone, so a
// run is repeated exactly by its seed.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x5eed5eed5eed5eed))
}

// round3 keeps three decimals, so readings look like a sensor's.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// steady is sine plus noise; the other generators build on it. Its
// phase comes from the seed, so two devices of a scenario differ.
type steady struct {
	rng   *rand.Rand
	tick  int
	phase float64
	init  bool
}

func (g *steady) base() (temperature, pressure float64) {
	if !g.init {
		g.phase, g.init = g.rng.Float64()*2*math.Pi, true
	}
	t := float64(g.tick)
	temperature = 21 + 4*math.Sin(2*math.Pi*t/sinePeriod+g.phase) + g.rng.NormFloat64()*0.15
	pressure = 1.2 + 0.05*math.Sin(2*math.Pi*t/(1.5*sinePeriod)+g.phase) + g.rng.NormFloat64()*0.005
	return temperature, pressure
}

func (g *steady) Next() Frame {
	temp, press := g.base()
	g.tick++
	return Frame{Samples: []Sample{
		{Signal: sigTemperature.Name, Value: round3(temp)},
		{Signal: sigPressure.Name, Value: round3(press)},
	}}
}

// drift adds a slow ramp to the steady temperature.
type drift struct{ steady }

func (g *drift) Next() Frame {
	temp, press := g.base()
	temp += rampPerPoll * float64(g.tick)
	g.tick++
	return Frame{Samples: []Sample{
		{Signal: sigTemperature.Name, Value: round3(temp)},
		{Signal: sigPressure.Name, Value: round3(press)},
	}}
}

// fault steps the temperature between faultLevels and makes one signal
// BAD every faultBadEvery polls, starting with the first, so a fault
// shows at once.
type fault struct {
	steady
	level float64
}

func (g *fault) Next() Frame {
	temp, press := g.base()
	if g.tick > 0 && g.tick%faultStepEvery == 0 {
		g.level = faultLevels[g.rng.IntN(len(faultLevels))]
	}
	f := Frame{Samples: []Sample{
		{Signal: sigTemperature.Name, Value: round3(temp + g.level)},
		{Signal: sigPressure.Name, Value: round3(press)},
	}}
	if g.tick%faultBadEvery == 0 {
		bad := &f.Samples[g.rng.IntN(len(f.Samples))]
		bad.Value, bad.Code = 0, faultCodes[g.rng.IntN(len(faultCodes))]
	}
	g.tick++
	return f
}

// outage answers up polls, then one Down frame, then plans the next
// cycle. The time it stays down is the scenario's Outage, kept by the
// adapter: polls stop while the device is gone.
type outage struct {
	steady
	up int
}

func (g *outage) plan() { g.up = outageUpMin + g.rng.IntN(outageUpSpread) }

func (g *outage) Next() Frame {
	if g.up == 0 {
		g.plan()
		return Frame{Down: true}
	}
	g.up--
	return g.steady.Next()
}

// schemaDrift is steady with a humidity field that vanishes after
// vanishAfter polls.
type schemaDrift struct{ steady }

func (g *schemaDrift) Next() Frame {
	tick := g.tick
	f := g.steady.Next()
	if tick < vanishAfter {
		h := 45 + 5*math.Sin(2*math.Pi*float64(tick)/(2*sinePeriod)) + g.rng.NormFloat64()*0.3
		f.Samples = append(f.Samples, Sample{Signal: vanishingField, Value: round3(h)})
	}
	return f
}
