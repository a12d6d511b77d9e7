"""gyreprof.analysis"""
