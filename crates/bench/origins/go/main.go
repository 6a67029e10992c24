// The lab's Go origin: the demo origin's endpoints (crates/origin/README.md) served by Go's
// net/http the way a Go API is usually written: handlers that call w.Write with the whole
// body and let net/http choose the framing (Content-Length when the handler's output fits in
// its 2 KiB buffer, chunked otherwise), and a streaming handler that writes and flushes one
// element at a time. So a proxy in front of it reads what it reads from a real Go service:
// net/http's 4 KiB buffered writer, its chunk framing, its write sizes.
//
// The bytes of every body are the demo origin's own (the lab's correctness check compares
// them): the date JSON, /hello, the /stream elements (the same filler template and offsets),
// and /reqinfo's body_sha256.
//
// Standard library only, so `go build` needs no module download.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	records     = 10000
	templateLen = 2 * 1024 * 1024
	maxChunks   = 1000000
	minSize     = 32
	maxSize     = 1024 * 1024
	maxDelayMs  = 10000
	// `{"i":` + `,"data":"` + `"}`
	fixedOverhead = 5 + 9 + 2
	maxNameBody   = 64 * 1024
	maxName       = 1024
	hello         = "Hello World!Hello World!Hello World!Hello World!Hello World!Hello World!Hello World!Hello World!Hello World!Hello World!"
)

var words = []string{
	"account", "active", "address", "admin", "alpha", "amount", "archive", "balance", "batch",
	"billing", "branch", "bucket", "build", "cache", "card", "cart", "channel", "city", "client",
	"cluster", "comment", "config", "country", "created", "customer", "data", "default", "delta",
	"deploy", "device", "disabled", "email", "enabled", "event", "failed", "feature", "file",
	"filter", "group", "health", "host", "image", "index", "invoice", "item", "label", "level",
	"limit", "location", "message", "metric", "mode", "name", "network", "node", "order", "owner",
	"page", "payment", "pending", "phone", "policy", "price", "product", "profile", "project",
	"queue", "region", "release", "report", "request", "role", "route", "sample", "schema",
	"search", "secret", "server", "service", "session", "shipping", "source", "status", "stock",
	"stream", "street", "success", "tag", "target", "team", "tenant", "ticket", "token", "total",
	"update", "user", "value", "version", "volume", "warning", "window", "zone",
}

func splitmix64(x uint64) uint64 {
	z := x + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// The filler text of /stream, byte for byte the demo origin's (crates/origin/src/padding.rs).
func buildTemplate() []byte {
	out := make([]byte, 0, templateLen+16)
	state := uint64(0x5EED)
	for len(out) < templateLen {
		state = splitmix64(state)
		out = append(out, words[state%uint64(len(words))]...)
		if state>>60 == 0 {
			out = append(out, '0'+byte(state>>32)%10, '0'+byte(state>>40)%10)
		}
		out = append(out, ' ')
	}
	return out[:templateLen]
}

var template = buildTemplate()

func offset(index uint64, n int) int {
	room := uint64(0)
	if templateLen >= n {
		room = uint64(templateLen - n)
	}
	return int(splitmix64(index) % (room + 1))
}

func element(index uint64, size int, last bool) []byte {
	digits := strconv.FormatUint(index, 10)
	pad := size - fixedOverhead - len(digits)
	if pad < 0 {
		pad = 0
	}
	from := offset(index, pad)
	out := make([]byte, 0, size+2)
	if index == 0 {
		out = append(out, '[')
	} else {
		out = append(out, ',')
	}
	out = append(out, `{"i":`...)
	out = append(out, digits...)
	out = append(out, `,"data":"`...)
	out = append(out, template[from:from+pad]...)
	out = append(out, `"}`...)
	if last {
		out = append(out, ']')
	}
	return out
}

func repeatedArray(el []byte, count int) []byte {
	out := make([]byte, 0, 2+count*(len(el)+1))
	out = append(out, '[')
	for i := 0; i < count; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, el...)
	}
	return append(out, ']')
}

// The date body, rendered once per UTC day.
type dates struct {
	mu   sync.RWMutex
	day  int64
	body []byte
}

func today() int64 { return time.Now().Unix() / 86400 }

func renderDay(day int64) []byte {
	t := time.Unix(day*86400, 0).UTC()
	el := fmt.Sprintf(`{"year":%d,"month":%d,"day":%d}`, t.Year(), int(t.Month()), t.Day())
	return repeatedArray([]byte(el), records)
}

func (d *dates) bodyFor(day int64) []byte {
	d.mu.RLock()
	if d.day == day {
		b := d.body
		d.mu.RUnlock()
		return b
	}
	d.mu.RUnlock()
	b := renderDay(day)
	d.mu.Lock()
	if day > d.day {
		d.day, d.body = day, b
	}
	d.mu.Unlock()
	return b
}

func jsonError(w http.ResponseWriter, status int, message string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"error": message})
	w.Write(b)
}

func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	jsonError(w, http.StatusMethodNotAllowed, "method not allowed")
	return false
}

func within(value string, min, max uint64) (uint64, bool) {
	v, err := strconv.ParseUint(value, 10, 64)
	return v, err == nil && v >= min && v <= max
}

func stream(w http.ResponseWriter, r *http.Request) {
	chunks, size, delay := uint64(10), uint64(1024), uint64(0)
	for key, values := range r.URL.Query() {
		v := values[0]
		ok := true
		switch key {
		case "chunks":
			chunks, ok = within(v, 1, maxChunks)
			if !ok {
				jsonError(w, 400, "`chunks` must be an integer from 1 to 1000000")
				return
			}
		case "size":
			size, ok = within(v, minSize, maxSize)
			if !ok {
				jsonError(w, 400, "`size` must be an integer from 32 to 1048576 (bytes per element)")
				return
			}
		case "delay_ms":
			delay, ok = within(v, 0, maxDelayMs)
			if !ok {
				jsonError(w, 400, "`delay_ms` must be an integer from 0 to 10000")
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodHead {
		return
	}
	flusher, _ := w.(http.Flusher)
	for i := uint64(0); i < chunks; i++ {
		if i > 0 && delay > 0 {
			time.Sleep(time.Duration(delay) * time.Millisecond)
		}
		if _, err := w.Write(element(i, int(size), i+1 == chunks)); err != nil {
			return
		}
		// One chunk per element, as a streaming handler sends them.
		if flusher != nil {
			flusher.Flush()
		}
	}
}

type reqInfo struct {
	Method        string      `json:"method"`
	Path          string      `json:"path"`
	Version       string      `json:"version"`
	Headers       [][2]string `json:"headers"`
	ContentLength *int64      `json:"content_length"`
	Chunked       bool        `json:"chunked"`
	BodyLength    int64       `json:"body_length"`
	BodySha256    string      `json:"body_sha256"`
}

func reqinfo(w http.ResponseWriter, r *http.Request) {
	hash := sha256.New()
	n, err := io.Copy(hash, r.Body)
	if err != nil {
		jsonError(w, 400, "the request body could not be read")
		return
	}
	info := reqInfo{
		Method:     r.Method,
		Path:       r.URL.RequestURI(),
		Version:    r.Proto,
		Headers:    [][2]string{},
		BodyLength: n,
		BodySha256: hex.EncodeToString(hash.Sum(nil)),
	}
	for name, values := range r.Header {
		for _, v := range values {
			info.Headers = append(info.Headers, [2]string{strings.ToLower(name), v})
		}
	}
	if r.ContentLength >= 0 && len(r.TransferEncoding) == 0 {
		cl := r.ContentLength
		info.ContentLength = &cl
	}
	for _, te := range r.TransferEncoding {
		if strings.EqualFold(te, "chunked") {
			info.Chunked = true
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(info)
}

func whatIsMyName(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > maxNameBody {
		jsonError(w, 413, "the body is over 64 KiB")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxNameBody+1))
	if err != nil {
		jsonError(w, 400, "the request body could not be read")
		return
	}
	if len(body) > maxNameBody {
		jsonError(w, 413, "the body is over 64 KiB")
		return
	}
	form, err := url.ParseQuery(string(body))
	name, present := form["name"]
	if err != nil || !present {
		jsonError(w, 400, "the form has no `name` field")
		return
	}
	if len(name[0]) > maxName {
		jsonError(w, 400, "the name is over 1 KiB")
		return
	}
	el, _ := json.Marshal(map[string]string{"name": name[0]})
	w.Header().Set("Content-Type", "application/json")
	w.Write(repeatedArray(el, records))
}

func main() {
	listen := flag.String("listen", "", "TCP address (127.0.0.1:PORT)")
	unix := flag.String("unix", "", "unix socket path")
	name := flag.String("name", "", "X-Origin value")
	flag.Parse()
	d := &dates{day: today()}
	d.body = renderDay(d.day)
	mux := http.NewServeMux()
	mux.HandleFunc("/what-date-is-it", func(w http.ResponseWriter, r *http.Request) {
		if !getOrHead(w, r) {
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "max-age=5")
		if r.Method == http.MethodHead {
			return
		}
		// The whole body in one Write, no Content-Length: net/http frames it chunked.
		w.Write(d.bodyFor(today()))
	})
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		if !getOrHead(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, hello)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		if getOrHead(w, r) {
			stream(w, r)
		}
	})
	mux.HandleFunc("/reqinfo", reqinfo)
	mux.HandleFunc("/what-is-my-name", whatIsMyName)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		jsonError(w, 404, "no such endpoint")
	})
	var handler http.Handler = mux
	if *name != "" {
		inner := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Origin", *name)
			inner.ServeHTTP(w, r)
		})
	}
	var ln net.Listener
	var err error
	switch {
	case *unix != "":
		os.Remove(*unix)
		ln, err = net.Listen("unix", *unix)
	case *listen != "":
		ln, err = net.Listen("tcp", *listen)
	default:
		log.Fatal("--listen or --unix is required")
	}
	if err != nil {
		log.Fatal(err)
	}
	server := &http.Server{Handler: handler, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		server.Close()
	}()
	if err := server.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
