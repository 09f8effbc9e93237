"""The Post Processor pass: scouts measured, the avalanche, prepared and the final statuses.
"""
