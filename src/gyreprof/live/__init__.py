"""gyreprof.live"""
