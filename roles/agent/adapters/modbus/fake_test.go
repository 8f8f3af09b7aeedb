package modbus

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/goburrow/modbus"
)

// fakeTransport stands in for a goburrow handler: an in-memory device
// whose reads can be made to fail per block.
type fakeTransport struct {
	modbus.Client // nil; calling anything not overridden panics

	mu         sync.Mutex
	unit       uint8
	regs       map[fakeKey]uint16 // bits store 0 or 1
	readErr    func(area Area, unit uint8, start, count uint16) error
	short      bool // answer reads one byte short
	connectErr error
	connects   int
	closes     int
	reads      int
	writes     []string
}

type fakeKey struct {
	unit uint8
	area Area
	addr uint16
}

func newFake() *fakeTransport { return &fakeTransport{regs: map[fakeKey]uint16{}} }

func (f *fakeTransport) set(unit uint8, area Area, addr uint16, vals ...uint16) {
	for i, v := range vals {
		f.regs[fakeKey{unit, area, addr + uint16(i)}] = v
	}
}

func (f *fakeTransport) setUnit(u uint8)          { f.unit = u }
func (f *fakeTransport) setTimeout(time.Duration) {}
func (f *fakeTransport) Connect() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects++
	return f.connectErr
}
func (f *fakeTransport) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	return nil
}

func (f *fakeTransport) read(area Area, start, count uint16) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.readErr != nil {
		if err := f.readErr(area, f.unit, start, count); err != nil {
			return nil, err
		}
	}
	var out []byte
	if area.IsBit() {
		out = make([]byte, (int(count)+7)/8)
		for i := 0; i < int(count); i++ {
			if f.regs[fakeKey{f.unit, area, start + uint16(i)}] != 0 {
				out[i/8] |= 1 << (i % 8)
			}
		}
	} else {
		out = make([]byte, 2*int(count))
		for i := 0; i < int(count); i++ {
			binary.BigEndian.PutUint16(out[2*i:], f.regs[fakeKey{f.unit, area, start + uint16(i)}])
		}
	}
	if f.short {
		out = out[:len(out)-1]
	}
	return out, nil
}

func (f *fakeTransport) ReadHoldingRegisters(a, q uint16) ([]byte, error) {
	return f.read(Holding, a, q)
}
func (f *fakeTransport) ReadInputRegisters(a, q uint16) ([]byte, error) { return f.read(Input, a, q) }
func (f *fakeTransport) ReadCoils(a, q uint16) ([]byte, error)          { return f.read(Coil, a, q) }
func (f *fakeTransport) ReadDiscreteInputs(a, q uint16) ([]byte, error) {
	return f.read(Discrete, a, q)
}

func (f *fakeTransport) WriteSingleCoil(a, v uint16) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("coil u%d %d %04x", f.unit, a, v))
	return nil, nil
}

func (f *fakeTransport) WriteSingleRegister(a, v uint16) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("reg u%d %d %04x", f.unit, a, v))
	f.regs[fakeKey{f.unit, Holding, a}] = v
	return nil, nil
}

func (f *fakeTransport) WriteMultipleRegisters(a, q uint16, b []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("regs u%d %d %d %x", f.unit, a, q, b))
	return nil, nil
}
