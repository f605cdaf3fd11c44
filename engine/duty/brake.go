package duty

// logBrakeLocked says when the monitor starts and stops holding a mass
// expiry back.
func (d *MonitorDuty) logBrakeLocked() {
	held, since := d.mu.m.Braking()
	switch {
	case held > 0 && since != d.mu.heldSince:
		d.mu.heldSince = since
		d.cfg.Logf("engine: node monitor: %d of %d nodes missed their heartbeats at once; holding them in their status for up to %v, since this manager being overloaded or cut off is likelier than that many nodes failing together",
			held, d.mu.m.Len(), d.mu.m.Config().MassExpiryHold)
	case held == 0 && d.mu.heldSince != 0:
		d.mu.heldSince = 0
		d.cfg.Logf("engine: node monitor: the mass-expiry hold ended (nodes were heard again, or the hold ran out): a node silent past its deadline expires as usual")
	}
}
