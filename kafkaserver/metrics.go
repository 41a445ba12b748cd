package kafkaserver

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of the server's metrics.
const meterName = "github.com/diskless-go/diskless/kafkaserver"

// registerMetrics creates the server's instruments on mp (Config.MeterProvider)
// and a callback that reads its counters when they are collected; the
// registration is undone at Close.
//
//	kafkaserver.connections.closed       connections the server closed, by reason: limit (max.connections,
//	                                     max.connections.per.ip), idle, slow_frame, tls_handshake,
//	                                     sasl_expired
//	kafkaserver.sasl.authentications     SASL authentications, by result (ok, failed); re-authentications
//	                                     (KIP-368) are counted in ok and in kafkaserver.sasl.reauthentications
//	kafkaserver.authorization.denied     actions the authorizer denied (each resource of a request)
//	kafkaserver.quota.throttled          responses throttled for a client quota (quotas.go)
//	kafkaserver.quota.throttle_time      the throttle time of those, in milliseconds
func (s *Server) registerMetrics(mp metric.MeterProvider) (metric.Registration, error) {
	m := mp.Meter(meterName)
	closed, err := m.Int64ObservableCounter("kafkaserver.connections.closed", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections the server closed, by reason (limit, idle, slow_frame, tls_handshake, sasl_expired)."))
	if err != nil {
		return nil, err
	}
	auths, err := m.Int64ObservableCounter("kafkaserver.sasl.authentications", metric.WithUnit("{authentication}"),
		metric.WithDescription("SASL authentications, by result (ok, failed)."))
	if err != nil {
		return nil, err
	}
	reauths, err := m.Int64ObservableCounter("kafkaserver.sasl.reauthentications", metric.WithUnit("{authentication}"),
		metric.WithDescription("SASL re-authentications of a connection that succeeded (KIP-368)."))
	if err != nil {
		return nil, err
	}
	denied, err := m.Int64ObservableCounter("kafkaserver.authorization.denied", metric.WithUnit("{action}"),
		metric.WithDescription("Actions the authorizer denied: one for each resource of a request."))
	if err != nil {
		return nil, err
	}
	throttled, err := m.Int64ObservableCounter("kafkaserver.quota.throttled", metric.WithUnit("{response}"),
		metric.WithDescription("Responses throttled for a client quota: the connection muted for the response's throttle time."))
	if err != nil {
		return nil, err
	}
	throttleTime, err := m.Int64ObservableCounter("kafkaserver.quota.throttle_time", metric.WithUnit("ms"),
		metric.WithDescription("The throttle time of the responses throttled for a client quota."))
	if err != nil {
		return nil, err
	}
	reason := func(r string) metric.ObserveOption { return metric.WithAttributes(attribute.String("reason", r)) }
	result := func(r string) metric.ObserveOption { return metric.WithAttributes(attribute.String("result", r)) }
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := &s.stats
		o.ObserveInt64(closed, st.refused.Load(), reason("limit"))
		o.ObserveInt64(closed, st.idle.Load(), reason("idle"))
		o.ObserveInt64(closed, st.slowFrames.Load(), reason("slow_frame"))
		o.ObserveInt64(closed, st.tlsFailed.Load(), reason("tls_handshake"))
		o.ObserveInt64(closed, st.saslExpired.Load(), reason("sasl_expired"))
		o.ObserveInt64(auths, st.saslOK.Load(), result("ok"))
		o.ObserveInt64(auths, st.saslFailed.Load(), result("failed"))
		o.ObserveInt64(reauths, st.saslReauth.Load())
		o.ObserveInt64(denied, st.denied.Load())
		o.ObserveInt64(throttled, st.throttled.Load())
		o.ObserveInt64(throttleTime, st.throttledMillis.Load())
		return nil
	}, closed, auths, reauths, denied, throttled, throttleTime)
}
