package httplimit

import (
	"bufio"
	"net"
	"net/http"
)

// fieldsWriter is the handler's ResponseWriter: it sets the RateLimit
// fields of an admitted request when the handler starts its answer, so
// that they show the cost the handler reported before then.
type fieldsWriter struct {
	http.ResponseWriter
	set func() // nil once called
}

func (w *fieldsWriter) start() {
	if w.set != nil {
		w.set()
		w.set = nil
	}
}

// WriteHeader sets the fields, then writes the status.
func (w *fieldsWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

// Write sets the fields, then writes b.
func (w *fieldsWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

// Flush sets the fields, then flushes, when the writer under it can.
func (w *fieldsWriter) Flush() {
	w.start()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over, when the writer under it can; the
// fields are not sent.
func (w *fieldsWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.set = nil
	}
	return c, rw, err
}

// Unwrap returns the writer under it, for http.ResponseController.
func (w *fieldsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
