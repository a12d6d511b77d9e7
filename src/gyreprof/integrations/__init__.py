"""gyreprof.integrations"""
