# Developer entry points. `make test` is the test command CI runs (.ci/run).
GO          ?= go
# Where `go install` puts tools: GOBIN if set, else the first GOPATH's bin.
GOBIN_DIR   := $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $(GOBIN_DIR)/staticcheck)
# Pinned: the module proxy serves exact versions only, and a newer
# staticcheck may report new findings on unchanged code.
STATICCHECK_VERSION ?= v0.8.0
# Fuzz budgets are execution counts, not durations: Go 1.26's fuzz
# coordinator can report a spurious "context deadline exceeded" failure when
# a -fuzztime duration ends under CPU load (golang/go#75804, fixed in 1.27);
# a count has no deadline to race. `make test` runs them as a smoke check
# of the 69 targets (about 10 s each on a 2-CPU runner at 10000); a longer
# hunt sets FUZZEXECS, e.g. `make fuzz FUZZEXECS=1000000x`.
FUZZDECODE  ?= 300000x
FUZZEXECS   ?= 10000x
VERSION     ?= dev
LDFLAGS      = -s -w -X github.com/edgeplat/edgeplat/core/buildinfo.Version=$(VERSION)

.PHONY: all build run test lint tools cross fuzz docs bench-agent release-snapshot clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o build/edgeplat .

# Everything on embedded defaults: SQLite, in-process stream store, embedded
# broker (on 11883, since a system broker often holds 1883).
run:
	$(GO) run . all-in-one --mqtt-port 11883

# Lint, a short fuzz run of every decoder of outside input, then all tests
# with the race detector. cmd's end-to-end tests start whole roles, agents,
# browsers and containers; on a loaded 2-CPU runner they pass go test's
# default 10-minute budget per package, so the budget is set here.
test: lint fuzz
	$(GO) test -race -count=1 -timeout 30m ./...

# Installs the lint tools `make test` needs on a fresh clone (only what is
# missing), so the README's command works without .ci/run.
tools:
	@if [ ! -x "$(STATICCHECK)" ]; then \
		echo "installing staticcheck $(STATICCHECK_VERSION)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

# go.mod and go.sum must be what `go mod tidy` makes of them: -diff prints
# the change it would make and fails, so a forgotten tidy fails CI here.
lint: tools
	$(GO) mod tidy -diff
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# Every GOOS/GOARCH[/GOARM] that .goreleaser.yaml builds (cmd's
# TestCrossTargetsMatchRelease keeps the two lists equal). CI builds and vets
# each, since a file that compiles only on Linux breaks the release, not the
# tests; vet with GOOS set also type-checks the test files.
CROSS_TARGETS ?= linux/amd64 linux/arm64 linux/arm/7 darwin/amd64 darwin/arm64
cross:
	@set -e; for t in $(CROSS_TARGETS); do \
		os=$${t%%/*}; rest=$${t#*/}; arch=$${rest%%/*}; arm=; \
		case $$rest in */*) arm=$${rest#*/};; esac; \
		echo "cross: $$os/$$arch$${arm:+ GOARM=$$arm}"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$$arm $(GO) build ./...; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$$arm $(GO) vet ./...; \
	done

# Every Fuzz function of the repository, one run each (go test -fuzz takes
# one target per run); cmd's TestMakeFuzzListsEveryFuzzTarget keeps this
# list and the test files in step.
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZDECODE) ./core/codec
	$(GO) test -run='^$$' -fuzz='^FuzzParseMsgID$$' -fuzztime=$(FUZZEXECS) ./core/codec
	$(GO) test -run='^$$' -fuzz='^FuzzTopicID$$' -fuzztime=$(FUZZEXECS) ./core/codec
	$(GO) test -run='^$$' -fuzz='^FuzzJSON$$' -fuzztime=$(FUZZEXECS) ./core/codec
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeReceipts$$' -fuzztime=$(FUZZEXECS) ./core/control
	$(GO) test -run='^$$' -fuzz='^FuzzParseCommandTopic$$' -fuzztime=$(FUZZEXECS) ./core/control
	$(GO) test -run='^$$' -fuzz='^FuzzParseTargetState$$' -fuzztime=$(FUZZEXECS) ./core/control
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeJobDispatch$$' -fuzztime=$(FUZZEXECS) ./core/control
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeEvent$$' -fuzztime=$(FUZZEXECS) ./core/control
	$(GO) test -run='^$$' -fuzz='^FuzzDeliver$$' -fuzztime=$(FUZZEXECS) ./roles/agent/commands
	$(GO) test -run='^$$' -fuzz='^FuzzMergeConfig$$' -fuzztime=$(FUZZEXECS) ./roles/agent/anomaly
	$(GO) test -run='^$$' -fuzz='^FuzzSampleShape$$' -fuzztime=$(FUZZEXECS) ./roles/agent/discovery
	$(GO) test -run='^$$' -fuzz='^FuzzParseQuery$$' -fuzztime=$(FUZZEXECS) ./roles/api/agentlogs
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeLayout$$' -fuzztime=$(FUZZEXECS) ./roles/api/dashboards
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeEventPayload$$' -fuzztime=$(FUZZEXECS) ./roles/api/anomaly
	$(GO) test -run='^$$' -fuzz='^FuzzRuleInput$$' -fuzztime=$(FUZZEXECS) ./roles/api/anomaly
	$(GO) test -run='^$$' -fuzz='^FuzzListParams$$' -fuzztime=$(FUZZEXECS) ./roles/api/events
	$(GO) test -run='^$$' -fuzz='^FuzzStateHash$$' -fuzztime=$(FUZZEXECS) ./roles/api/events
	$(GO) test -run='^$$' -fuzz='^FuzzParseSelection$$' -fuzztime=$(FUZZEXECS) ./roles/api/export
	$(GO) test -run='^$$' -fuzz='^FuzzVerifyLink$$' -fuzztime=$(FUZZEXECS) ./roles/api/export
	$(GO) test -run='^$$' -fuzz='^FuzzParseLine$$' -fuzztime=$(FUZZEXECS) ./core/spool
	$(GO) test -run='^$$' -fuzz='^FuzzParseMessage$$' -fuzztime=$(FUZZEXECS) ./core/telemetry
	$(GO) test -run='^$$' -fuzz='^FuzzParseLogBatch$$' -fuzztime=$(FUZZEXECS) ./core/telemetry
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeMatchesStdlib$$' -fuzztime=$(FUZZEXECS) ./core/telemetry
	$(GO) test -run='^$$' -fuzz='^FuzzAppendJSONMatchesStdlib$$' -fuzztime=$(FUZZEXECS) ./core/telemetry
	$(GO) test -run='^$$' -fuzz='^FuzzCompactMatchesJSON$$' -fuzztime=$(FUZZEXECS) ./core/telemetry
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeCompact$$' -fuzztime=$(FUZZEXECS) ./core/telemetry
	$(GO) test -run='^$$' -fuzz='^FuzzParseID$$' -fuzztime=$(FUZZEXECS) ./core/streamstore
	$(GO) test -run='^$$' -fuzz='^FuzzMatchGlob$$' -fuzztime=$(FUZZEXECS) ./core/streamstore/memory
	$(GO) test -run='^$$' -fuzz='^FuzzClusterKey$$' -fuzztime=$(FUZZEXECS) ./core/streamstore/redis
	$(GO) test -run='^$$' -fuzz='^FuzzMatchTopic$$' -fuzztime=$(FUZZEXECS) ./core/mqttx
	$(GO) test -run='^$$' -fuzz='^FuzzFirstPacketConn$$' -fuzztime=$(FUZZEXECS) ./roles/broker
	$(GO) test -run='^$$' -fuzz='^FuzzParseTopic$$' -fuzztime=$(FUZZEXECS) ./roles/api/envelope
	$(GO) test -run='^$$' -fuzz='^FuzzMap$$' -fuzztime=$(FUZZEXECS) ./roles/api/envelope
	$(GO) test -run='^$$' -fuzz='^FuzzMapMsgpack$$' -fuzztime=$(FUZZEXECS) ./roles/api/envelope
	$(GO) test -run='^$$' -fuzz='^FuzzParseHistoryQuery$$' -fuzztime=$(FUZZEXECS) ./roles/api
	$(GO) test -run='^$$' -fuzz='^FuzzParseTagQuery$$' -fuzztime=$(FUZZEXECS) ./roles/api/registry
	$(GO) test -run='^$$' -fuzz='^FuzzLocationTag$$' -fuzztime=$(FUZZEXECS) ./roles/api/registry
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZEXECS) ./roles/api/query
	$(GO) test -run='^$$' -fuzz='^FuzzTranslate$$' -fuzztime=$(FUZZEXECS) ./roles/api/query
	$(GO) test -run='^$$' -fuzz='^FuzzAppendTimestamp$$' -fuzztime=$(FUZZEXECS) ./core/telemetry
	$(GO) test -run='^$$' -fuzz='^FuzzParseStep$$' -fuzztime=$(FUZZEXECS) ./roles/api/readings
	$(GO) test -run='^$$' -fuzz='^FuzzParseTime$$' -fuzztime=$(FUZZEXECS) ./roles/api/readings
	$(GO) test -run='^$$' -fuzz='^FuzzIdentifier$$' -fuzztime=$(FUZZEXECS) ./core/brokerauth
	$(GO) test -run='^$$' -fuzz='^FuzzTopicRules$$' -fuzztime=$(FUZZEXECS) ./core/brokerauth
	$(GO) test -run='^$$' -fuzz='^FuzzParseKeySet$$' -fuzztime=$(FUZZEXECS) ./roles/api/idp
	$(GO) test -run='^$$' -fuzz='^FuzzSchema$$' -fuzztime=$(FUZZEXECS) ./roles/api/brokermon
	$(GO) test -run='^$$' -fuzz='^FuzzVerify$$' -fuzztime=$(FUZZEXECS) ./roles/api/idp
	$(GO) test -run='^$$' -fuzz='^FuzzLogUpload$$' -fuzztime=$(FUZZEXECS) ./roles/api/device
	$(GO) test -run='^$$' -fuzz='^FuzzRecord$$' -fuzztime=$(FUZZEXECS) ./roles/api/receipts
	$(GO) test -run='^$$' -fuzz='^FuzzBrokerUserFilter$$' -fuzztime=$(FUZZEXECS) ./core/brokerauth
	$(GO) test -run='^$$' -fuzz='^FuzzParseRegister$$' -fuzztime=$(FUZZEXECS) ./roles/agent/adapters/modbus
	$(GO) test -run='^$$' -fuzz='^FuzzParseConfig$$' -fuzztime=$(FUZZEXECS) ./roles/agent/simulation
	$(GO) test -run='^$$' -fuzz='^FuzzValidate$$' -fuzztime=$(FUZZEXECS) ./roles/agent/adapters/opcua
	$(GO) test -run='^$$' -fuzz='^FuzzFrameReadings$$' -fuzztime=$(FUZZEXECS) ./roles/agent/adapters/mqtt
	$(GO) test -run='^$$' -fuzz='^FuzzParseRegister$$' -fuzztime=$(FUZZEXECS) ./roles/agent/adapters/bacnet
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZEXECS) ./roles/agent/adapters/bacnet/wire
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeServices$$' -fuzztime=$(FUZZEXECS) ./roles/agent/adapters/bacnet/wire
	$(GO) test -run='^$$' -fuzz='^FuzzAppRoundTrip$$' -fuzztime=$(FUZZEXECS) ./roles/agent/adapters/bacnet/wire
	$(GO) test -run='^$$' -fuzz='^FuzzBuffer$$' -fuzztime=$(FUZZEXECS) ./roles/agent/framing
	$(GO) test -run='^$$' -fuzz='^FuzzParsers$$' -fuzztime=$(FUZZEXECS) ./roles/agent/sysinfo
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeResponse$$' -fuzztime=$(FUZZEXECS) ./roles/api/ai
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeStrictNUL$$' -fuzztime=$(FUZZEXECS) ./core/httpx
	$(GO) test -run='^$$' -fuzz='^FuzzLineProtocol$$' -fuzztime=$(FUZZEXECS) ./roles/agent/publish/dest
	$(GO) test -run='^$$' -fuzz='^FuzzReceiptOptions$$' -fuzztime=$(FUZZEXECS) ./roles/agent/publish/dest
	$(GO) test -run='^$$' -fuzz='^FuzzBuildRoundTrip$$' -fuzztime=$(FUZZEXECS) ./roles/agent/publish/payload
	$(GO) test -run='^$$' -fuzz='^FuzzFlatten$$' -fuzztime=$(FUZZEXECS) ./roles/agent/drift
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZEXECS) ./roles/api/promapi
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeChanges$$' -fuzztime=$(FUZZEXECS) ./roles/api/admin
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeAlertRule$$' -fuzztime=$(FUZZEXECS) ./roles/api/extdash
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeThresholdUpdate$$' -fuzztime=$(FUZZEXECS) ./roles/api/extdash

# The agent's footprint benchmark: 10 Modbus devices x 100 registers polled
# every second for 5 minutes against Debian's python3-pymodbus server.
BENCH_MODBUS_PORT ?= 15020
BENCH_DURATION    ?= 5m
bench-agent: build
	@/usr/bin/python3 roles/agent/adapters/modbus/testdata/server.py --port $(BENCH_MODBUS_PORT) --units 10 --registers 100 & \
	server=$$!; trap 'kill $$server' EXIT; sleep 2; \
	./build/edgeplat bench agent --modbus 127.0.0.1:$(BENCH_MODBUS_PORT) --devices 10 --registers 100 --duration $(BENCH_DURATION)

# Regenerate docs/configuration.md from the key table in config/keys.go.
docs:
	$(GO) test ./config -run TestConfigurationDoc -update

# Without images: dockers_v2 needs Docker with buildx; podman builds the
# image from the same Dockerfile (docs/packaging.md, "Container image").
release-snapshot:
	goreleaser release --snapshot --clean --skip=publish,docker

clean:
	rm -rf build
