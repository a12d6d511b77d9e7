"""gyreprof.diagnose"""
