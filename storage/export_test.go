package storage

// ListsFromCache is how many LISTs the store's list cache has answered.
func (s *Store) ListsFromCache() int64 { return s.cache.served.Load() }

// RestartListCache ends the list cache's watch, as a broken watch would; the
// cache then primes again.
func (s *Store) RestartListCache() {
	s.cache.mu.Lock()
	stop := s.cache.stop
	s.cache.mu.Unlock()
	if stop != nil {
		stop()
	}
}
