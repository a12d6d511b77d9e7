"""gyreprof.export"""
