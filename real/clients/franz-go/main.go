// kafkasim driver for franz-go (kgo) (protocol: ../README.md): one JSON command per stdin line,
// one JSON reply per stdout line. Only replies go to stdout; logs go to stderr.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var (
	bootstrap = flag.String("bootstrap", envOr("KAFKASIM_BOOTSTRAP", "127.0.0.1:9092"), "seed broker")
	clientID  = flag.String("client-id", "kafkasim-driver", "client id")
	codecs    = map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
)

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

type cmd map[string]any

func (c cmd) str(k, d string) string {
	if v, ok := c[k].(string); ok {
		return v
	}
	return d
}

func (c cmd) num(k string, d int64) int64 {
	if v, ok := c[k].(float64); ok {
		return int64(v)
	}
	return d
}

func (c cmd) has(k string) bool { v, ok := c[k]; return ok && v != nil }

func noteErr(errs []string, err error) []string {
	m := fmt.Sprintf("%T: %v", err, err)
	for _, e := range errs {
		if e == m {
			return errs
		}
	}
	if len(errs) < 20 {
		errs = append(errs, m)
	}
	return errs
}

func baseOpts() []kgo.Opt {
	// --bootstrap is a comma list (as for every driver); SeedBrokers takes one address per argument
	return append([]kgo.Opt{kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ClientID(*clientID),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil))}, securityOpts()...)
}

// securityOpts: KAFKASIM_CLIENT_SECURITY (JSON, ../README.md) as kgo options — TLS from PEM files,
// SASL PLAIN or SCRAM-SHA-256/512. A bad value ends the driver with a message.
func securityOpts() []kgo.Opt {
	raw := os.Getenv("KAFKASIM_CLIENT_SECURITY")
	if raw == "" {
		return nil
	}
	var s map[string]string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, "KAFKASIM_CLIENT_SECURITY:", err)
		os.Exit(2)
	}
	var opts []kgo.Opt
	if strings.HasSuffix(s["protocol"], "SSL") {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s["ca"] != "" {
			pem, err := os.ReadFile(s["ca"])
			if err != nil {
				fmt.Fprintln(os.Stderr, "KAFKASIM_CLIENT_SECURITY ca:", err)
				os.Exit(2)
			}
			cfg.RootCAs = x509.NewCertPool()
			cfg.RootCAs.AppendCertsFromPEM(pem)
		}
		if s["cert"] != "" {
			pair, err := tls.LoadX509KeyPair(s["cert"], s["key"])
			if err != nil {
				fmt.Fprintln(os.Stderr, "KAFKASIM_CLIENT_SECURITY cert:", err)
				os.Exit(2)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	user, pass := s["username"], s["password"]
	switch s["mechanism"] {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	}
	return opts
}

// ------------------------------------------------------------------ produce
var producers = map[string]*kgo.Client{}

func acksOf(c cmd) string {
	switch v := c["acks"].(type) {
	case string:
		if v == "all" || v == "-1" {
			return "all"
		}
		return v
	case float64:
		if v == -1 {
			return "all"
		}
		return fmt.Sprint(int(v))
	}
	return ""
}

func producerFor(c cmd) (*kgo.Client, error) {
	explicitPartition := c.has("partition")
	key := fmt.Sprint(acksOf(c), "|", c.str("compression", "none"), "|", c["idempotent"], "|", explicitPartition, "|",
		c.str("transactional_id", ""))
	if p, ok := producers[key]; ok {
		return p, nil
	}
	opts := append(baseOpts(), kgo.AllowAutoTopicCreation())
	switch acksOf(c) {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	idem, hasIdem := c["idempotent"].(bool)
	if (hasIdem && !idem) || (!hasIdem && acksOf(c) != "" && acksOf(c) != "all") {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	codec, ok := codecs[c.str("compression", "none")]
	if !ok {
		return nil, fmt.Errorf("codec %q not supported", c.str("compression", ""))
	}
	if c.str("compression", "none") != "none" {
		opts = append(opts, kgo.ProducerBatchCompression(codec))
	}
	if explicitPartition {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if c.has("transactional_id") {
		opts = append(opts, kgo.TransactionalID(c.str("transactional_id", "")))
	}
	p, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	producers[key] = p
	return p, nil
}

func produce(c cmd) (any, error) {
	p, err := producerFor(c)
	if err != nil {
		return nil, err
	}
	n := int(c.num("count", 0))
	topic, prefix := c.str("topic", ""), c.str("prefix", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.num("timeout_ms", 30000))*time.Millisecond)
	defer cancel()
	results := make([][]any, n)
	var mu sync.Mutex
	var errs []string
	acks0 := acksOf(c) == "0"
	txn := c.has("transactional_id")
	if txn {
		if err := p.BeginTransaction(); err != nil {
			return nil, err
		}
	}
	for i := 0; i < n; i++ {
		i := i
		v := fmt.Sprintf("%s-%d", prefix, i)
		r := &kgo.Record{Topic: topic, Value: []byte(v)}
		if c.has("key_prefix") {
			r.Key = []byte(fmt.Sprintf("%s-%d", c.str("key_prefix", ""), i))
		}
		if c.has("partition") {
			r.Partition = int32(c.num("partition", 0))
		}
		p.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = noteErr(errs, err)
				return
			}
			off := r.Offset
			if acks0 {
				off = -1
			}
			results[i] = []any{r.Partition, off, v}
		})
	}
	if err := p.Flush(ctx); err != nil {
		mu.Lock()
		errs = noteErr(errs, err)
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	acked := [][]any{}
	for _, r := range results {
		if r != nil {
			acked = append(acked, r)
		}
	}
	if errs == nil {
		errs = []string{}
	}
	reply := map[string]any{"op": "produced", "acked": acked, "errors": errs}
	if txn {
		commit := c.str("transaction", "commit") == "commit" && len(errs) == 0
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return nil, err
		}
		reply["transaction"] = map[bool]string{true: "committed", false: "aborted"}[commit]
	}
	return reply, nil
}

// ------------------------------------------------------------------ consume
type member struct {
	topic    string
	group    string
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	returned map[int32]int64
}

var consumers = map[string]*member{}

func newMember(c cmd) (*member, error) {
	m := &member{topic: c.str("topic", ""), group: c.str("group", ""), assigned: map[int32]bool{}, returned: map[int32]int64{}}
	start := kgo.NewOffset().AtStart()
	if c.str("from", "earliest") != "earliest" {
		start = kgo.NewOffset().AtEnd()
	}
	opts := append(baseOpts(), kgo.ConsumeTopics(m.topic), kgo.ConsumeResetOffset(start))
	if c.str("isolation", "") == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if m.group != "" {
		opts = append(opts, kgo.ConsumerGroup(m.group), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(time.Duration(c.num("session_timeout_ms", 10000))*time.Millisecond),
			kgo.HeartbeatInterval(time.Duration(c.num("heartbeat_interval_ms", 1000))*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range a[m.topic] {
					m.assigned[p] = true
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range r[m.topic] {
					delete(m.assigned, p)
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range r[m.topic] {
					delete(m.assigned, p)
				}
			}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	return m, nil
}

func (m *member) assignment() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []int32{}
	for p := range m.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *member) consume(max int, timeout time.Duration) ([][]any, []string) {
	out := [][]any{}
	var errs []string
	deadline := time.Now().Add(timeout)
	for len(out) < max && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := m.cl.PollRecords(ctx, max-len(out))
		cancel()
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			errs = noteErr(errs, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, []any{r.Partition, r.Offset, string(r.Value)})
			m.mu.Lock()
			m.returned[r.Partition] = r.Offset + 1
			if m.group == "" {
				m.assigned[r.Partition] = true
			}
			m.mu.Unlock()
		})
		if len(errs) > 0 && len(out) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if errs == nil {
		errs = []string{}
	}
	return out, errs
}

func (m *member) commit() ([][]int64, error) {
	owned := map[int32]bool{}
	for _, p := range m.assignment() {
		owned[p] = true
	}
	m.mu.Lock()
	offsets := map[int32]kgo.EpochOffset{}
	out := [][]int64{}
	for p, o := range m.returned {
		if owned[p] {
			offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
			out = append(out, []int64{int64(p), o})
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	if len(offsets) == 0 {
		return out, nil
	}
	var cerr error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						cerr = fmt.Errorf("commit %s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
					}
				}
			}
		})
	return out, cerr
}

func consume(c cmd) (any, error) {
	key := c.str("topic", "") + "|" + c.str("group", "") + "|" + c.str("isolation", "")
	m, ok := consumers[key]
	if !ok {
		var err error
		if m, err = newMember(c); err != nil {
			return nil, err
		}
		consumers[key] = m
	}
	max := int(c.num("max", 1<<30))
	recs, errs := m.consume(max, time.Duration(c.num("timeout_ms", 10000))*time.Millisecond)
	reply := map[string]any{"op": "consumed", "records": recs, "assignment": m.assignment(), "errors": errs}
	if b, _ := c["commit"].(bool); b && m.group != "" {
		committed, err := m.commit()
		if err != nil {
			return nil, err
		}
		reply["committed"] = committed
	}
	return reply, nil
}

func commit(c cmd) (any, error) {
	all := [][]int64{}
	for _, m := range consumers {
		if m.group == "" {
			continue
		}
		o, err := m.commit()
		if err != nil {
			return nil, err
		}
		all = append(all, o...)
	}
	return map[string]any{"op": "committed", "offsets": all}, nil
}

// ------------------------------------------------------------------ consume-transform-produce
// A GroupTransactSession: a read_committed member of `group` on `input` whose transactional
// producer copies each polled batch to the same partitions of `output`; End(TryCommit) commits the
// batch's offsets in the transaction, or aborts it (and rewinds to the committed offsets) when a
// rebalance revoked partitions meanwhile.
type pipeline struct {
	input, output string
	sess          *kgo.GroupTransactSession
	transactions  int64
	mu            sync.Mutex
	assigned      map[int32]bool
}

var pipelines = map[string]*pipeline{}

func newPipeline(c cmd) (*pipeline, error) {
	pl := &pipeline{input: c.str("input", ""), output: c.str("output", ""), assigned: map[int32]bool{}}
	drop := func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		for _, p := range r[pl.input] {
			delete(pl.assigned, p)
		}
	}
	opts := append(baseOpts(), kgo.TransactionalID(c.str("transactional_id", "")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ConsumerGroup(c.str("group", "")),
		kgo.ConsumeTopics(pl.input), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(time.Duration(c.num("session_timeout_ms", 10000))*time.Millisecond),
		kgo.HeartbeatInterval(time.Duration(c.num("heartbeat_interval_ms", 1000))*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			pl.mu.Lock()
			defer pl.mu.Unlock()
			for _, p := range a[pl.input] {
				pl.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop))
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, err
	}
	pl.sess = sess
	return pl, nil
}

func (pl *pipeline) assignment() []int32 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := []int32{}
	for p := range pl.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// step: one polled batch in one transaction; the batch's input records and whether it committed.
// Every abortEvery-th transaction is aborted on purpose (End(TryAbort) rewinds to the committed
// offsets): its output must never be read.
func (pl *pipeline) step(batch int, deadline time.Time, errs []string, abortEvery int64) ([][]any, bool, []string) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	fs := pl.sess.PollRecords(ctx, batch)
	cancel()
	for _, fe := range fs.Errors() {
		if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
			errs = noteErr(errs, fe.Err)
		}
	}
	rows := [][]any{}
	var recs []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		rows = append(rows, []any{r.Partition, r.Offset, string(r.Value)})
		recs = append(recs, &kgo.Record{Topic: pl.output, Partition: r.Partition, Value: r.Value})
	})
	if len(rows) == 0 {
		return rows, false, errs
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pl.transactions++
	if err := pl.sess.Begin(); err != nil {
		return rows, false, noteErr(errs, err)
	}
	if err := pl.sess.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		errs = noteErr(errs, err)
	}
	try := kgo.TryCommit
	if abortEvery > 0 && pl.transactions%abortEvery == 0 {
		try = kgo.TryAbort
	}
	committed, err := pl.sess.End(ctx, try)
	if err != nil {
		errs = noteErr(errs, err)
	}
	return rows, committed, errs
}

func transform(c cmd) (any, error) {
	key := strings.Join([]string{c.str("input", ""), c.str("output", ""), c.str("group", ""),
		c.str("transactional_id", "")}, "|")
	pl, ok := pipelines[key]
	if !ok {
		var err error
		if pl, err = newPipeline(c); err != nil {
			return nil, err
		}
		pipelines[key] = pl
	}
	want, batch := int(c.num("max", 1<<30)), int(c.num("batch", 50))
	deadline := time.Now().Add(time.Duration(c.num("timeout_ms", 10000)) * time.Millisecond)
	committed, aborted, done := [][][]any{}, 0, 0
	errs := []string{}
	for done < want && time.Now().Before(deadline) {
		var rows [][]any
		var ok bool
		stepEnd := time.Now().Add(200 * time.Millisecond)
		if stepEnd.After(deadline) {
			stepEnd = deadline
		}
		rows, ok, errs = pl.step(batch, stepEnd, errs, c.num("abort_every", 0))
		switch {
		case len(rows) > 0 && ok:
			committed = append(committed, rows)
			done += len(rows)
		case len(rows) > 0:
			aborted++
		}
	}
	return map[string]any{"op": "transformed", "transactions": committed, "aborted": aborted,
		"assignment": pl.assignment(), "errors": errs}, nil
}

func closeAll() {
	for _, pl := range pipelines {
		pl.sess.Close()
	}
	for _, m := range consumers {
		if m.group != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = m.cl.LeaveGroupContext(ctx)
			cancel()
		}
		m.cl.Close()
	}
	for _, p := range producers {
		p.Close()
	}
}

func franzVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return "unknown"
}

func main() {
	flag.Parse()
	out := bufio.NewWriter(os.Stdout)
	reply := func(obj map[string]any, c cmd) {
		if c != nil {
			if id, ok := c["id"]; ok {
				obj["id"] = id
			}
		}
		b, err := json.Marshal(obj)
		if err != nil {
			b, _ = json.Marshal(map[string]any{"op": "error", "error": err.Error()})
		}
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var c cmd
		if err := json.Unmarshal([]byte(line), &c); err != nil || c == nil {
			reply(map[string]any{"op": "error", "error": fmt.Sprintf("bad command line: %v", err), "cmd": nil}, nil)
			continue
		}
		op := c.str("op", "")
		var res any
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			switch op {
			case "hello":
				res = map[string]any{"op": "hello", "client": "franz-go", "version": franzVersion(), "language": "go",
					"codecs": []string{"none", "gzip", "snappy", "lz4", "zstd"}, "default_idempotent": true}
			case "produce":
				res, err = produce(c)
			case "consume":
				res, err = consume(c)
			case "commit":
				res, err = commit(c)
			case "transform":
				res, err = transform(c)
			case "close":
				closeAll()
				res = map[string]any{"op": "closed"}
			default:
				err = fmt.Errorf("unknown op %q", op)
			}
		}()
		if err != nil {
			reply(map[string]any{"op": "error", "error": fmt.Sprintf("%T: %v", err, err), "cmd": op}, c)
		} else {
			reply(res.(map[string]any), c)
		}
		if op == "close" {
			os.Exit(0)
		}
	}
	closeAll()
}
